#!/bin/bash
# ec2runners: the user data of a runner instance, rendered by the data
# source ec2runners_runner_script of terraform-provider-ec2runners. It
# installs the agent ec2runners-agent {{.Version}} (the one in the image
# when it is that version; else the release's, checked against its
# SHA-256), writes its configuration, and hands over to it: the agent
# installs itself as the systemd service ec2runners-agent.
set -euo pipefail
umask 077
version={{q .Version}}
agent={{q .AgentPath}}
config={{q .ConfigPath}}
case $(uname -m) in
x86_64) arch=amd64 sha256={{q .SHA256.amd64}} ;;
aarch64) arch=arm64 sha256={{q .SHA256.arm64}} ;;
*) echo "ec2runners: no agent for $(uname -m)" >&2; exit 1 ;;
esac
if [ "$("$agent" version 2>/dev/null)" != "$version" ]; then
	if [ -z "$sha256" ]; then
		echo "ec2runners: this provider build names no released agent: bake ec2runners-agent $version into the image at $agent" >&2
		exit 1
	fi
	url={{q .DownloadURL}}/ec2runners-agent_${version}_linux_$arch
	tmp=$(mktemp)
	curl -fsSL --retry 5 --retry-connrefused --max-time 300 -o "$tmp" "$url"
	if ! echo "$sha256  $tmp" | sha256sum --check --status; then
		echo "ec2runners: $url is not the agent released as $version (SHA-256 mismatch)" >&2
		exit 1
	fi
	install -D -m 0711 "$tmp" "$agent"
	rm -f "$tmp"
fi
install -d -m 0700 "${config%/*}"
cat >"$config" <<'EC2RUNNERS_AGENT_CONFIG'
{{.Config}}
EC2RUNNERS_AGENT_CONFIG
exec "$agent" install -config "$config"{{if .SystemdDir}} -systemd-dir {{q .SystemdDir}}{{end}}
