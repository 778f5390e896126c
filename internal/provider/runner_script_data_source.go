package provider

import (
	"context"
	"encoding/base64"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

var _ datasource.DataSourceWithConfigure = (*runnerScriptDataSource)(nil)

// NewRunnerScriptDataSource is the ec2runners_runner_script data source.
func NewRunnerScriptDataSource() datasource.DataSource { return &runnerScriptDataSource{} }

type runnerScriptDataSource struct{ data *providerData }

type runnerScriptModel struct {
	ID                 types.String `tfsdk:"id"`
	Pool               types.String `tfsdk:"pool"`
	Region             types.String `tfsdk:"region"`
	GitHubURL          types.String `tfsdk:"github_url"`
	GitHubOwner        types.String `tfsdk:"github_owner"`
	GitHubRepository   types.String `tfsdk:"github_repository"`
	RunnerVersion      types.String `tfsdk:"runner_version"`
	RunnerDownloadURL  types.String `tfsdk:"runner_download_url"`
	RunnerSHA256       types.String `tfsdk:"runner_sha256"`
	RunnerUser         types.String `tfsdk:"runner_user"`
	PreRunnerScript    types.String `tfsdk:"pre_runner_script"`
	HeartbeatInterval  types.String `tfsdk:"heartbeat_interval"`
	JobsMetadataAccess types.Bool   `tfsdk:"jobs_metadata_access"`
	Content            types.String `tfsdk:"content"`
	ContentBase64      types.String `tfsdk:"content_base64"`
}

const (
	defaultGitHubURL  = "https://github.com"
	defaultRunnerUser = "runner"
)

func (d *runnerScriptDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_runner_script"
}

func (d *runnerScriptDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Renders the user data of the pool's launch template: the agent that keeps each runner instance in the pool. As user data it installs itself as the systemd service `ec2runners-agent`, which heartbeats, terminates the instance past its deadline (or stops it, while the pool keeps it in its stopped tier), registers a GitHub runner labelled with each claim's run id, and deregisters it on release. It runs as root, as EC2 runs user data, and keeps jobs (the runner user) away from the pool: no instance metadata (a firewall rule), no secret in any process's arguments, `/proc` with `hidepid`, a root-owned runner installation checked before every registration, and on release every process of the runner user killed and its files wiped (guide \"Runner security\"). It needs only bash 5, curl, coreutils, util-linux, procps, iptables or nft, and systemd (stock Amazon Linux 2023 and Ubuntu), IMDSv2 with instance tags in metadata, and an instance profile allowed what the guide lists. Nothing is read from AWS: the script is computed from the arguments.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The pool's name."},
			"pool": schema.StringAttribute{
				Required: true, Description: "Name of the pool the instances serve.",
				Validators: poolNameValidators(),
			},
			"region": schema.StringAttribute{
				Optional: true, Computed: true, Description: "Region of the pool. Default: the provider's.",
				Validators: []validator.String{regionValidator()},
			},
			"github_url": schema.StringAttribute{
				Optional: true, Computed: true, Description: "Web URL of GitHub, or of a GitHub Enterprise Server. https only (registration tokens travel over it); http only to a loopback host (`127.0.0.0/8`, `::1`, `localhost`), for tests. Default `" + defaultGitHubURL + "`.",
				Validators: []validator.String{secureURLValidator()},
			},
			"github_owner": schema.StringAttribute{
				Required: true, Description: "User or organization the runners register with; the pool's `github_owner`.",
				Validators: []validator.String{githubOwnerValidator()},
			},
			"github_repository": schema.StringAttribute{
				Optional: true, Description: "Repository the runners register with; without it, at organization level.",
				Validators: []validator.String{githubRepositoryValidator()},
			},
			"runner_version": schema.StringAttribute{
				Optional: true, Computed: true, Description: "actions/runner release to install at boot (the runner then keeps itself up to date). Default `" + agentscript.DefaultRunnerVersion + "`.",
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`), "must be a release version such as "+agentscript.DefaultRunnerVersion)},
			},
			"runner_download_url": schema.StringAttribute{
				Optional: true, Description: "Where to download the runner tarball instead of GitHub's releases, e.g. a mirror for instances without internet access. https only; http only to a loopback host (`127.0.0.0/8`, `::1`, `localhost`), for tests.",
				Validators: []validator.String{secureURLValidator()},
			},
			"runner_sha256": schema.StringAttribute{
				Optional: true, Description: "SHA-256 of the runner tarball, 64 hexadecimal digits (as `sha256sum` prints it): the agent refuses a download that does not match, e.g. from a mirror (`runner_download_url`). Default: no check.",
				Validators: []validator.String{stringvalidator.RegexMatches(agentscript.SHA256Pattern, "must be a SHA-256 digest: 64 hexadecimal digits")},
			},
			"runner_user": schema.StringAttribute{
				Optional: true, Computed: true, Description: "Unprivileged user the runner runs as; created if missing. Default `" + defaultRunnerUser + "`.",
				Validators: []validator.String{stringvalidator.RegexMatches(agentscript.UserPattern, "must be a user name: up to 32 lower-case letters, digits, '_' or '-', starting with a letter or '_'")},
			},
			"pre_runner_script": schema.StringAttribute{
				Optional: true, Sensitive: true,
				Description: "Script run once per instance, as root, after the runner is installed and before it serves a claim (install tools, warm caches). With a `#!` line it runs with that interpreter, otherwise with bash. Its failure signals `UD_FAILED` and the instance is given up. " +
					"Sensitive, but not secret: it ends up in `content`, that is in the launch template's user data, which anyone allowed to read the launch template or the instance's attributes can read, and which any process on the instance can read from the instance metadata service, jobs included unless the agent's metadata firewall keeps the runner user from it. Fetch secrets at run time (e.g. from SSM Parameter Store with the instance profile) instead of writing them here.",
			},
			"heartbeat_interval": schema.StringAttribute{
				Optional: true, Computed: true, Description: "How often the agent writes its heartbeat, `1s` to `10s`; claims call a runner unhealthy after 15s without one. Default `5s`.",
				Validators: []validator.String{durationBetween(time.Second, 10*time.Second)},
			},
			"jobs_metadata_access": schema.BoolAttribute{
				Optional: true, Computed: true,
				Description: "Whether jobs may reach the instance metadata service (169.254.169.254, fd00:ec2::254). Default `false`: a firewall rule for the runner user keeps them from it, and so from the instance role's credentials, which can write this runner's heartbeats and signals and stop or terminate it. Set it only if jobs need something from the metadata service, knowing that they then hold the instance role; jobs that need AWS should assume a role of their own with GitHub's OIDC token instead.",
			},
			// Terraform does not carry a sensitive argument's mark over to what
			// a provider computes from it: the script holds pre_runner_script.
			"content": schema.StringAttribute{
				Computed: true, Sensitive: true,
				Description: "The script. Sensitive, as it holds `pre_runner_script`: plans show `(sensitive value)` for it and for what is set from it (such as the launch template's `user_data`), and an output of it needs `sensitive = true`.",
			},
			"content_base64": schema.StringAttribute{
				Computed: true, Sensitive: true,
				Description: "The script, base64-encoded, for `aws_launch_template.user_data`. Sensitive, as `content`.",
			},
		},
	}
}

func (d *runnerScriptDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (d *runnerScriptDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m runnerScriptModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	setDefault := func(v *types.String, fallback string) {
		if v.IsNull() {
			*v = types.StringValue(fallback)
		}
	}
	setDefault(&m.Region, d.data.clients.Region)
	setDefault(&m.GitHubURL, defaultGitHubURL)
	setDefault(&m.RunnerVersion, agentscript.DefaultRunnerVersion)
	setDefault(&m.RunnerUser, defaultRunnerUser)
	setDefault(&m.HeartbeatInterval, protocol.FormatDuration(agentscript.DefaultHeartbeatInterval))
	if m.JobsMetadataAccess.IsNull() {
		m.JobsMetadataAccess = types.BoolValue(false)
	}
	heartbeat, _ := time.ParseDuration(m.HeartbeatInterval.ValueString()) // validated
	script, err := agentscript.Render(agentscript.Options{
		Pool:               m.Pool.ValueString(),
		Region:             m.Region.ValueString(),
		GitHubURL:          m.GitHubURL.ValueString(),
		GitHubOwner:        m.GitHubOwner.ValueString(),
		GitHubRepository:   m.GitHubRepository.ValueString(),
		RunnerVersion:      m.RunnerVersion.ValueString(),
		RunnerDownloadURL:  m.RunnerDownloadURL.ValueString(),
		RunnerSHA256:       m.RunnerSHA256.ValueString(),
		RunnerUser:         m.RunnerUser.ValueString(),
		PreRunnerScript:    m.PreRunnerScript.ValueString(),
		HeartbeatInterval:  heartbeat,
		JobsMetadataAccess: m.JobsMetadataAccess.ValueBool(),
	})
	if err != nil {
		// Render names the setting first: "github_url: ...".
		name, _, _ := strings.Cut(err.Error(), ":")
		resp.Diagnostics.AddAttributeError(path.Root(name), "Cannot render the runner script", err.Error())
		return
	}
	m.ID = m.Pool
	m.Content = types.StringValue(script)
	m.ContentBase64 = types.StringValue(base64.StdEncoding.EncodeToString([]byte(script)))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
