package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
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
	HeartbeatInterval  duration     `tfsdk:"heartbeat_interval"`
	JobsMetadataAccess types.Bool   `tfsdk:"jobs_metadata_access"`
	BrokerFunction     types.String `tfsdk:"broker_function"`
	AgentDownloadURL   types.String `tfsdk:"agent_download_url"`
	AgentVersion       types.String `tfsdk:"agent_version"`
	Content            types.String `tfsdk:"content"`
	ContentBase64      types.String `tfsdk:"content_base64"`
}

const defaultGitHubURL = "https://github.com"

func (d *runnerScriptDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_runner_script"
}

func (d *runnerScriptDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	urlValidators := func() []validator.String {
		return []validator.String{stringvalidator.LengthAtMost(agentscript.MaxURLLength), secureURLValidator()}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Renders the user data of the pool's launch template. " +
			"It is a short bootstrap that installs the agent, `ec2runners-agent`, and hands over to it. " +
			"The agent registers a GitHub runner for each claim, and stops or terminates the instance when its record says so. " +
			"It serves `x86_64` and `arm64` instances. " +
			"The bootstrap stays under 4 KB; only `pre_runner_script` can bring the user data near EC2's 16 KB limit. Nothing is read from AWS.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The pool's name."},
			"pool": schema.StringAttribute{
				Required: true, Description: "Name of the pool the instances serve, 3-40 characters of `A-Z a-z 0-9 _ -`.",
				Validators: poolNameValidators(),
			},
			"region": schema.StringAttribute{
				Optional: true, Computed: true, Description: "Region of the pool. Default: the provider's.",
				Validators: []validator.String{regionValidator()},
			},
			"github_url": schema.StringAttribute{
				Optional: true, Computed: true, Description: "Web URL of GitHub, or of a GitHub Enterprise Server. https only (registration tokens travel over it); http only to a loopback host (`127.0.0.0/8`, `::1`, `localhost`), for tests. At most 512 characters. Default `" + defaultGitHubURL + "`.",
				Validators: urlValidators(),
			},
			"github_owner": schema.StringAttribute{
				Required: true, Description: "User or organization the runners register with, 1-39 letters, digits or `-`, not starting with `-`; the pool's `github_owner`.",
				Validators: []validator.String{githubOwnerValidator()},
			},
			"github_repository": schema.StringAttribute{
				Optional: true, Description: "Repository the runners register with (its name, 1-100 letters, digits, `_`, `.` or `-`); without it, at organization level.",
				Validators: []validator.String{githubRepositoryValidator()},
			},
			"runner_version": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Pins the actions/runner release to install, `" + protocol.MinimumRunnerVersion + "` or later. " +
					"Without it, the agent installs GitHub's newest release and keeps idle runners up to date. " +
					"GitHub stops sending jobs to a pinned version about 30 days after the next release, so pin only with a plan to move the pin. " +
					"See the section \"The GitHub runner and its version\".",
				Validators: []validator.String{runnerVersionValidator()},
			},
			"runner_download_url": schema.StringAttribute{
				Optional: true, Description: "Where to download the archive of `runner_version` instead of GitHub's releases, e.g. a mirror for instances without internet access. Needs `runner_version`. https only; http only to a loopback host (`127.0.0.0/8`, `::1`, `localhost`), for tests. At most 512 characters.",
				Validators: append(urlValidators(), stringvalidator.AlsoRequires(path.MatchRoot("runner_version"))),
			},
			"runner_sha256": schema.StringAttribute{
				Optional: true, Description: "SHA-256 of the archive of `runner_version`, 64 hexadecimal digits (as `sha256sum` prints it): the agent refuses a download that does not match. Needs `runner_version`. Without a pinned version the agent checks the digest GitHub publishes for each release; a pinned version without it is not checked.",
				Validators: []validator.String{
					stringvalidator.RegexMatches(agent.SHA256Pattern, "must be a SHA-256 digest: 64 hexadecimal digits"),
					stringvalidator.AlsoRequires(path.MatchRoot("runner_version")),
				},
			},
			"runner_user": schema.StringAttribute{
				Optional: true, Computed: true, Description: "Unprivileged user the runner runs as, up to 32 lower-case letters, digits, `_` or `-`, starting with a letter or `_`; created if missing. Default `" + agentscript.DefaultRunnerUser + "`.",
				Validators: []validator.String{stringvalidator.RegexMatches(agent.UserPattern, "must be a user name: up to 32 lower-case letters, digits, '_' or '-', starting with a letter or '_'")},
			},
			"pre_runner_script": schema.StringAttribute{
				Optional: true, Sensitive: true,
				Description: "Script run once per instance, as root, after the runner is installed and before it serves a claim (install tools, warm caches). " +
					"With a `#!` line it runs with that interpreter, otherwise with bash. If it fails, the instance is given up (`UD_FAILED`). " +
					"It counts against EC2's 16 KB of user data. " +
					"It is readable in the launch template and from the instance: keep secrets out of it. See the section \"Sensitive values\".",
			},
			"heartbeat_interval": schema.StringAttribute{
				Optional: true, Computed: true, CustomType: durationType{}, Description: "How often the agent writes its heartbeat, `1s` to `10s`; claims call a runner unhealthy after 15s without one. Default `5s`.",
				Validators: []validator.String{durationBetween(agent.MinimumHeartbeatInterval, agent.MaximumHeartbeatInterval)},
			},
			"jobs_metadata_access": schema.BoolAttribute{
				Optional: true, Computed: true,
				Description: "Whether jobs may reach the instance metadata service (169.254.169.254, fd00:ec2::254). " +
					"Default `false`: a firewall rule keeps the runner user from it, and so from the instance role's credentials. " +
					"Set it only if jobs need the metadata service: they then hold the instance role. " +
					"Jobs that need AWS should assume a role of their own with GitHub's OIDC token.",
			},
			"broker_function": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Name (1-64 letters, digits, `_` and `-`) or ARN of the pool's broker, the Lambda function through which workflows claim runners. " +
					"A run claimed through it hands each runner a registration grant instead of a registration token, and the agent asks the broker, with the grant, for a just-in-time registration for each job: " +
					"every job starts on a registration no other job used, the runner user wiped since the last one, while the instance stays warm across jobs and runs. " +
					"Required when workflows claim through the broker (an agent without it cannot use a grant, and fails the claim's registration); " +
					"the instance role needs `lambda:InvokeFunction` on it. Runs claimed directly register one runner for all their jobs, with or without it.",
				Validators: []validator.String{stringvalidator.RegexMatches(agent.BrokerFunctionPattern, "must be a Lambda function's name (1-64 characters of A-Z a-z 0-9 _ -) or its ARN")},
			},
			"agent_download_url": schema.StringAttribute{
				Optional: true, MarkdownDescription: "URL of a directory holding the agent's release binaries, `ec2runners-agent_<version>_linux_amd64` and `ec2runners-agent_<version>_linux_arm64` (a mirror for instances without internet access). " +
					"The bootstrap checks a download against the SHA-256 of the release all the same. https only; http only to a loopback host (`127.0.0.0/8`, `::1`, `localhost`), for tests. At most 512 characters. " +
					"Default: the provider's release on GitHub, `" + agentscript.ReleaseRepository + "/releases/download/v<version>`.",
				Validators: urlValidators(),
			},
			"agent_version": schema.StringAttribute{
				Computed: true, Description: "Version of the agent the user data installs: the provider's.",
			},
			// Terraform does not carry a sensitive argument's mark over to what
			// a provider computes from it: the script holds pre_runner_script.
			"content": schema.StringAttribute{
				Computed: true, Sensitive: true,
				Description: "The user data. Sensitive, as it holds `pre_runner_script`: plans show `(sensitive value)` for it and for what is set from it (such as the launch template's `user_data`), and an output of it needs `sensitive = true`.",
			},
			"content_base64": schema.StringAttribute{
				Computed: true, Sensitive: true,
				Description: "The user data, base64-encoded, for `aws_launch_template.user_data`. Sensitive, as `content`.",
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
	setDefault(&m.RunnerUser, agentscript.DefaultRunnerUser)
	if m.HeartbeatInterval.IsNull() {
		m.HeartbeatInterval = durationOf(agentscript.DefaultHeartbeatInterval)
	}
	if m.JobsMetadataAccess.IsNull() {
		m.JobsMetadataAccess = types.BoolValue(false)
	}
	heartbeat := m.HeartbeatInterval.get(&resp.Diagnostics)
	release := agentscript.Built(d.data.version)
	userData, err := agentscript.Render(agentscript.Options{
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
		BrokerFunction:     m.BrokerFunction.ValueString(),
		Agent:              release,
		AgentDownloadURL:   m.AgentDownloadURL.ValueString(),
	})
	if err != nil {
		// Render names the setting first: "github_url: ...".
		name, _, _ := strings.Cut(err.Error(), ":")
		resp.Diagnostics.AddAttributeError(path.Root(name), "Cannot render the runner script", err.Error())
		return
	}
	if len(release.SHA256) == 0 {
		resp.Diagnostics.AddWarning("The user data runs only an agent baked into the image",
			fmt.Sprintf("This build of the provider (version %s) is not a release: it knows no released agent to download. Instances run only an ec2runners-agent %s baked into their image (guide \"Baking the agent into an image\").", release.Version, release.Version))
	}
	if v := m.RunnerVersion.ValueString(); v != "" {
		d.warnOutdatedRunner(ctx, v, &resp.Diagnostics)
	}
	m.ID = m.Pool
	m.AgentVersion = types.StringValue(release.Version)
	m.Content = types.StringValue(userData)
	m.ContentBase64 = types.StringValue(base64.StdEncoding.EncodeToString([]byte(userData)))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// warnOutdatedRunner warns when GitHub no longer sends jobs to the pinned
// runner version, or will within a week, as far as the provider's GitHub
// credentials can tell (without them, nothing is checked).
func (d *runnerScriptDataSource) warnOutdatedRunner(ctx context.Context, version string, diags *diag.Diagnostics) {
	if d.data.github == nil || d.data.github.Releases == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	releases, err := d.data.github.Releases.RunnerReleases(ctx)
	if err != nil {
		tflog.Warn(ctx, "cannot read the runner's releases to check runner_version", map[string]any{"error": err.Error()})
		return
	}
	policy, ok := protocol.RunnerPolicyAt(releases, time.Now())
	switch {
	case !ok:
	case !policy.Accepts(version):
		diags.AddAttributeWarning(path.Root("runner_version"), "GitHub no longer sends jobs to this runner version",
			fmt.Sprintf("runner_version pins %s, and GitHub sends jobs only to %s and later (its newest release is %s): the runners would register but get no job, and claims retire them and fail. Move the pin, or remove it to follow GitHub's releases.",
				version, policy.Minimum, policy.Newest.Version))
	default:
		until, ok := protocol.AcceptedUntil(releases, version)
		if ok && time.Until(until) < 7*24*time.Hour {
			diags.AddAttributeWarning(path.Root("runner_version"), "GitHub stops sending jobs to this runner version soon",
				fmt.Sprintf("runner_version pins %s, which GitHub accepts until %s (%s came out on %s). Move the pin before then, or remove it to follow GitHub's releases.",
					version, protocol.FormatTime(until), policy.Newest.Version, protocol.FormatTime(policy.Newest.PublishedAt)))
		}
	}
}
