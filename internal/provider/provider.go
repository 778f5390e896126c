// Package provider is the Terraform glue of the ec2runners provider:
// schemas, plan modifiers and diagnostics. The pool logic lives in
// internal/pool and internal/claim.
package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
)

var (
	_ provider.Provider                  = (*ec2runnersProvider)(nil)
	_ provider.ProviderWithListResources = (*ec2runnersProvider)(nil)
	_ provider.ProviderWithActions       = (*ec2runnersProvider)(nil)
)

type ec2runnersProvider struct {
	version string
}

// New returns the provider factory for the given version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &ec2runnersProvider{version: version} }
}

// providerData is what resources and data sources receive from Configure.
type providerData struct {
	clients     *awsconfig.Clients
	defaultTags map[string]string
	github      *claim.GitHubAccess // nil: no GitHub credentials
	// storedGitHub reads the pools' own GitHub credentials when github is
	// nil, once per provider configuration.
	storedGitHub *claim.StoredGitHub
	// broker makes the claim resource's claims through the pool's broker
	// (nil: directly, with the clients).
	broker  *broker.Client
	version string // the provider's, and so the agent's the user data installs
}

type providerModel struct {
	Region                 types.String `tfsdk:"region"`
	Profile                types.String `tfsdk:"profile"`
	SharedConfigFiles      types.List   `tfsdk:"shared_config_files"`
	SharedCredentialsFiles types.List   `tfsdk:"shared_credentials_files"`
	AccessKey              types.String `tfsdk:"access_key"`
	SecretKey              types.String `tfsdk:"secret_key"`
	Token                  types.String `tfsdk:"token"`
	MaxRetries             types.Int64  `tfsdk:"max_retries"`
	AssumeRole             *struct {
		RoleARN     types.String `tfsdk:"role_arn"`
		SessionName types.String `tfsdk:"session_name"`
		ExternalID  types.String `tfsdk:"external_id"`
		Duration    duration     `tfsdk:"duration"`
	} `tfsdk:"assume_role"`
	Endpoints *struct {
		SQS            types.String `tfsdk:"sqs"`
		DynamoDB       types.String `tfsdk:"dynamodb"`
		EC2            types.String `tfsdk:"ec2"`
		STS            types.String `tfsdk:"sts"`
		Logs           types.String `tfsdk:"logs"`
		SSM            types.String `tfsdk:"ssm"`
		SecretsManager types.String `tfsdk:"secretsmanager"`
		Lambda         types.String `tfsdk:"lambda"`
	} `tfsdk:"endpoints"`
	DefaultTags *struct {
		Tags types.Map `tfsdk:"tags"`
	} `tfsdk:"default_tags"`
	GitHub *githubModel `tfsdk:"github"`
	Broker *brokerModel `tfsdk:"broker"`
}

func (p *ec2runnersProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "ec2runners"
	resp.Version = p.version
}

func (p *ec2runnersProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	endpoint := func(service, envSuffix string) schema.StringAttribute {
		return schema.StringAttribute{
			Optional:    true,
			Description: "Endpoint URL of " + service + ", e.g. `http://localhost:4566` for LocalStack. Default: the SDK's, which honours `AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_" + envSuffix + "`.",
			Validators:  []validator.String{stringvalidator.RegexMatches(urlPattern, "must be an http:// or https:// URL")},
		}
	}
	resp.Schema = schema.Schema{
		Description: "Keeps a warm pool of self-hosted GitHub Actions runners on EC2. Region and credentials come from the AWS SDK's default chain (environment, shared files, SSO, web identity, IMDS) unless set here.",
		Attributes: map[string]schema.Attribute{
			"region": schema.StringAttribute{
				Optional:    true,
				Description: "AWS region. Default: `AWS_REGION`, then the profile's region. Required from one of them.",
				Validators:  []validator.String{regionValidator()},
			},
			"profile": schema.StringAttribute{
				Optional:    true,
				Description: "Named profile of the shared configuration files, at least one character. Default: `AWS_PROFILE`, then `default`.",
				Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"shared_config_files": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Description: "Shared config files to read instead of `~/.aws/config`, each path at least one character.",
				Validators:  []validator.List{listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
			},
			"shared_credentials_files": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Description: "Shared credentials files to read instead of `~/.aws/credentials`, each path at least one character.",
				Validators:  []validator.List{listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
			},
			"access_key": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Static access key ID; set together with `secret_key`. Prefer the default chain (e.g. GitHub OIDC web identity).",
				Validators:  []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("secret_key"))},
			},
			"secret_key": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Static secret access key; set together with `access_key`.",
				Validators:  []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("access_key"))},
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Session token for temporary static credentials.",
				Validators:  []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("access_key"))},
			},
			"max_retries": schema.Int64Attribute{
				Optional:    true,
				Description: "Maximum attempts of each AWS API call, retries included, at least 1. Default: `AWS_MAX_ATTEMPTS`, else 10. Throttling, 5xx and connection errors are retried with backoff within the operation's timeout; failed conditions never are.",
				Validators:  []validator.Int64{int64validator.AtLeast(1)},
			},
		},
		Blocks: map[string]schema.Block{
			"assume_role": schema.SingleNestedBlock{
				Description: "Role to assume with the base credentials.",
				Attributes: map[string]schema.Attribute{
					"role_arn": schema.StringAttribute{Optional: true, Description: "ARN of the role to assume, `arn:aws:iam::<account>:role/<name>` (or another partition's), the name 1 to 576 characters of letters, digits and `+ = , . @ _ - /`. Required when the block is present.",
						Validators: []validator.String{roleARNValidator()}},
					"session_name": schema.StringAttribute{Optional: true, Description: "Session name of the assumed role: 2-64 characters of letters, digits and `+ = , . @ _ -`.",
						Validators: []validator.String{sessionNameValidator()}},
					"external_id": schema.StringAttribute{Optional: true, Description: "External ID the role's trust policy requires: 2-1224 characters of letters, digits and `+ = , . @ : / _ -`.",
						Validators: externalIDValidators()},
					"duration": schema.StringAttribute{
						Optional:    true,
						CustomType:  durationType{},
						Description: "Session duration as a Go duration, `15m` to `12h`. Default: 15m.",
						Validators:  []validator.String{durationBetween(15*time.Minute, 12*time.Hour)},
					},
				},
			},
			"endpoints": schema.SingleNestedBlock{
				Description: "Custom service endpoints, e.g. for LocalStack.",
				Attributes: map[string]schema.Attribute{
					"sqs":            endpoint("SQS", "SQS"),
					"dynamodb":       endpoint("DynamoDB", "DYNAMODB"),
					"ec2":            endpoint("EC2", "EC2"),
					"sts":            endpoint("STS", "STS"),
					"logs":           endpoint("CloudWatch Logs (the pools' metrics)", "CLOUDWATCH_LOGS"),
					"ssm":            endpoint("SSM (a pool's GitHub credential)", "SSM"),
					"secretsmanager": endpoint("Secrets Manager (a pool's GitHub credential)", "SECRETS_MANAGER"),
					"lambda":         endpoint("Lambda (the pool's broker)", "LAMBDA"),
				},
			},
			"github": githubBlock(),
			"broker": brokerBlock(),
			"default_tags": schema.SingleNestedBlock{
				Description: "Tags for every taggable resource the provider creates: the pools' tables and queues, and the instances that claims launch. " +
					"A pool's own `tags` win on conflicts. They never replace the instances' own tags (`ec2runners:pool`, `AllowSelfTermination`, `InitialRunId`). " +
					"Volumes take their tags from the launch template's `tag_specifications`.",
				Attributes: map[string]schema.Attribute{
					"tags": schema.MapAttribute{ElementType: types.StringType, Optional: true,
						Description: "Tags to apply; at most 47, as EC2 allows 50 per instance and claims add 3. Keys are 1-128 characters, values at most 256, of letters, digits, spaces and `_ . : / = + - @`; keys do not start with `aws:` and are not `ec2runners:pool` or `ec2runners:class`.",
						Validators:  []validator.Map{tagsValidator{}, mapvalidator.SizeAtMost(maxDefaultTags)}},
				},
			},
		},
	}
}

func (p *ec2runnersProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for name, v := range map[string]interface{ IsUnknown() bool }{
		"region": m.Region, "profile": m.Profile, "access_key": m.AccessKey, "secret_key": m.SecretKey, "token": m.Token,
	} {
		if v.IsUnknown() {
			resp.Diagnostics.AddAttributeError(path.Root(name), "Unknown provider setting",
				fmt.Sprintf("Attribute %s must be known when Terraform plans: it cannot depend on a resource that is not created yet.", name))
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	opts := awsconfig.Options{
		Region:     m.Region.ValueString(),
		Profile:    m.Profile.ValueString(),
		AccessKey:  m.AccessKey.ValueString(),
		SecretKey:  m.SecretKey.ValueString(),
		Token:      m.Token.ValueString(),
		MaxRetries: int(m.MaxRetries.ValueInt64()),
		// Every AWS request's User-Agent says which release made it.
		ProviderVersion: p.version,
	}
	resp.Diagnostics.Append(m.SharedConfigFiles.ElementsAs(ctx, &opts.SharedConfigFiles, false)...)
	resp.Diagnostics.Append(m.SharedCredentialsFiles.ElementsAs(ctx, &opts.SharedCredentialsFiles, false)...)
	if ar := m.AssumeRole; ar != nil {
		if ar.RoleARN.ValueString() == "" {
			resp.Diagnostics.AddAttributeError(path.Root("assume_role").AtName("role_arn"), "Missing role ARN", "assume_role.role_arn is required when the assume_role block is present.")
			return
		}
		var d time.Duration // null (or not known): the default
		if !ar.Duration.IsUnknown() {
			d = ar.Duration.get(&resp.Diagnostics)
		}
		opts.AssumeRole = &awsconfig.AssumeRole{RoleARN: ar.RoleARN.ValueString(), SessionName: ar.SessionName.ValueString(), ExternalID: ar.ExternalID.ValueString(), Duration: d}
	}
	if e := m.Endpoints; e != nil {
		opts.Endpoints = awsconfig.Endpoints{SQS: e.SQS.ValueString(), DynamoDB: e.DynamoDB.ValueString(), EC2: e.EC2.ValueString(), STS: e.STS.ValueString(), Logs: e.Logs.ValueString(),
			SSM: e.SSM.ValueString(), SecretsManager: e.SecretsManager.ValueString(), Lambda: e.Lambda.ValueString()}
	}
	data := &providerData{defaultTags: map[string]string{}, version: p.version}
	if m.DefaultTags != nil {
		resp.Diagnostics.Append(m.DefaultTags.Tags.ElementsAs(ctx, &data.defaultTags, false)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	gh, d := m.GitHub.access(p.version)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	data.github = gh
	brokerFunction, brokerAudience, d := m.Broker.settings()
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	clients, err := awsconfig.New(ctx, opts)
	if err != nil {
		resp.Diagnostics.AddError("Cannot configure the ec2runners provider", err.Error())
		return
	}
	data.clients = clients
	data.storedGitHub = &claim.StoredGitHub{SSM: clients.SSM, SecretsManager: clients.SecretsManager, Client: m.GitHub.storedClient(p.version)}
	if brokerFunction != "" {
		data.broker = &broker.Client{Lambda: clients.Lambda, Function: brokerFunction, Audience: brokerAudience, Token: broker.ActionsToken{}}
	}
	resp.ResourceData = data
	resp.DataSourceData = data
	resp.ListResourceData = data
	resp.ActionData = data
}

func (p *ec2runnersProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{NewPoolResource, NewClaimResource}
}

func (p *ec2runnersProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{NewPoolDataSource, NewRunnersDataSource, NewRunnerScriptDataSource}
}

func (p *ec2runnersProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{NewClaimListResource}
}

func (p *ec2runnersProvider) Actions(context.Context) []func() action.Action {
	return []func() action.Action{NewReapAction, NewWarmAction}
}
