package provider

import (
	"cmp"
	"fmt"
	"os"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// githubModel is the provider's github block.
type githubModel struct {
	Token          types.String `tfsdk:"token"`
	AppID          types.Int64  `tfsdk:"app_id"`
	InstallationID types.Int64  `tfsdk:"installation_id"`
	PrivateKey     types.String `tfsdk:"private_key"`
	BaseURL        types.String `tfsdk:"base_url"`
	Owner          types.String `tfsdk:"owner"`
	Repository     types.String `tfsdk:"repository"`
}

func githubBlock() schema.SingleNestedBlock {
	app := func(name string) path.Expression { return path.MatchRelative().AtParent().AtName(name) }
	return schema.SingleNestedBlock{
		Description: "GitHub credentials, and the owner they mint runner tokens for. " +
			"In a pool with a `github_owner`, each claim mints a registration token for its runners, and each release a removal token. " +
			"They serve only pools whose `github_owner` and `github_repository` match `owner` and `repository`: a target read from a pool's table is not trusted. " +
			"Set either `token` or the three GitHub App settings. Tokens are never written to state or logs. " +
			"Without credentials here or in the environment, claims use the credential the pool keeps in its AWS account (its `github_credential`).",
		Attributes: map[string]schema.Attribute{
			"token": schema.StringAttribute{
				Optional: true, Sensitive: true,
				Description: "Token allowed to manage self-hosted runners: a fine-grained token with the repository permission \"Administration\" (read and write) or the organization permission \"Self-hosted runners\" (read and write); or a classic token with `repo` / `admin:org`. The repository permission \"Actions\" (read) also lets the pool's maintenance release the claims of workflow runs that ended (see the claim's `repository`). Default: `GITHUB_TOKEN`.",
				Validators:  []validator.String{stringvalidator.ConflictsWith(app("app_id"), app("installation_id"), app("private_key"))},
			},
			"app_id": schema.Int64Attribute{
				Optional: true, Description: "ID of a GitHub App with the permissions `token` needs, at least 1; set with `installation_id` and `private_key`. Default: `GITHUB_APP_ID`.",
				Validators: []validator.Int64{int64validator.AtLeast(1), int64validator.AlsoRequires(app("installation_id"), app("private_key"))},
			},
			"installation_id": schema.Int64Attribute{
				Optional: true, Description: "ID of the App's installation on the owner, at least 1. Default: `GITHUB_APP_INSTALLATION_ID`.",
				Validators: []validator.Int64{int64validator.AtLeast(1), int64validator.AlsoRequires(app("app_id"))},
			},
			"private_key": schema.StringAttribute{
				Optional: true, Sensitive: true, Description: "The App's private key, PEM (PKCS#1 or PKCS#8). Default: `GITHUB_APP_PRIVATE_KEY`.",
				Validators: []validator.String{stringvalidator.AlsoRequires(app("app_id"))},
			},
			"base_url": schema.StringAttribute{
				Optional: true, Description: "GitHub REST API root; `https://HOST/api/v3` for GitHub Enterprise Server. https only (the token travels over it); http only to a loopback host (`127.0.0.0/8`, `::1`, `localhost`), for tests. Default: `GITHUB_API_URL` (set in GitHub Actions jobs), then `https://api.github.com`.",
				Validators: []validator.String{secureURLValidator()},
			},
			"owner": schema.StringAttribute{
				Optional: true, Description: "GitHub user or organization the provider mints runner tokens for (1-39 letters, digits or `-`, not starting with `-`): a claim of a pool whose `github_owner` is another fails, and its release terminates the runners instead of returning them to the pool. Default: `GITHUB_REPOSITORY_OWNER` (set in GitHub Actions jobs). Required, from one of them, for pools with a `github_owner`.",
				Validators: []validator.String{githubOwnerValidator()},
			},
			"repository": schema.StringAttribute{
				Optional: true, Description: "Limits the tokens to this repository of `owner` (its name, 1-100 letters, digits, `_`, `.` or `-`): claims of pools whose runners register elsewhere (another repository, or the organization) fail, as for another owner. Default: any repository of `owner`, and its organization.",
				Validators: []validator.String{githubRepositoryValidator()},
			},
		},
	}
}

// access is what claims may do with GitHub: mint runner tokens with the
// block's credentials for its owner (and repository); nil when neither the
// block nor the environment gives credentials.
func (m *githubModel) access(version string) (*claim.GitHubAccess, diag.Diagnostics) {
	if m == nil {
		m = &githubModel{} // no block: the environment alone
	}
	c, diags := m.client(version)
	if c == nil {
		return nil, diags
	}
	owner := m.Owner.ValueString() // validated at plan time
	if owner == "" {
		owner = os.Getenv("GITHUB_REPOSITORY_OWNER")
		if owner != "" && !protocol.GitHubOwnerPattern.MatchString(owner) {
			diags.AddAttributeError(path.Root("github").AtName("owner"), "Invalid GITHUB_REPOSITORY_OWNER",
				fmt.Sprintf("github.owner defaults to GITHUB_REPOSITORY_OWNER, which is %q: not a GitHub user or organization name (1-39 letters, digits or '-', not starting with '-'). Set github.owner.", owner))
			return nil, diags
		}
	}
	return &claim.GitHubAccess{Tokens: c, Releases: c, Runs: c, Groups: c, Owner: owner, Repository: m.Repository.ValueString()}, diags
}

// storedClient is the GitHub client's settings for a pool's stored
// credential: the block's base_url, else the environment's.
func (m *githubModel) storedClient(version string) github.Config {
	var base string
	if m != nil {
		base = m.BaseURL.ValueString()
	}
	return github.Config{BaseURL: cmp.Or(base, os.Getenv("GITHUB_API_URL")), Version: version}
}

// client builds the GitHub client from the block and the environment; nil
// when neither gives credentials.
func (m *githubModel) client(version string) (*github.Client, diag.Diagnostics) {
	var diags diag.Diagnostics
	for name, unknown := range map[string]bool{
		"token": m.Token.IsUnknown(), "app_id": m.AppID.IsUnknown(), "installation_id": m.InstallationID.IsUnknown(),
		"private_key": m.PrivateKey.IsUnknown(), "base_url": m.BaseURL.IsUnknown(),
		"owner": m.Owner.IsUnknown(), "repository": m.Repository.IsUnknown(),
	} {
		if unknown {
			diags.AddAttributeError(path.Root("github").AtName(name), "Unknown provider setting",
				fmt.Sprintf("Attribute github.%s must be known when Terraform plans: it cannot depend on a resource that is not created yet.", name))
		}
	}
	if diags.HasError() {
		return nil, diags
	}
	cfg := github.Config{BaseURL: cmp.Or(m.BaseURL.ValueString(), os.Getenv("GITHUB_API_URL")), Version: version}
	appID, installationID := m.AppID.ValueInt64(), m.InstallationID.ValueInt64()
	key := m.PrivateKey.ValueString()
	configuredApp := appID != 0
	if !configuredApp && m.Token.ValueString() == "" && os.Getenv("GITHUB_APP_ID") != "" {
		var err error
		if appID, err = strconv.ParseInt(os.Getenv("GITHUB_APP_ID"), 10, 64); err != nil {
			diags.AddError("Invalid GITHUB_APP_ID", "GITHUB_APP_ID must be a number.")
		}
		if installationID, err = strconv.ParseInt(os.Getenv("GITHUB_APP_INSTALLATION_ID"), 10, 64); err != nil {
			diags.AddError("Invalid GITHUB_APP_INSTALLATION_ID", "GITHUB_APP_INSTALLATION_ID must be a number when GITHUB_APP_ID is set.")
		}
		key = os.Getenv("GITHUB_APP_PRIVATE_KEY")
		configuredApp = !diags.HasError()
	}
	switch {
	case diags.HasError():
		return nil, diags
	case configuredApp:
		cfg.App = &github.AppAuth{AppID: appID, InstallationID: installationID, PrivateKeyPEM: key}
	default:
		cfg.Token = cmp.Or(m.Token.ValueString(), os.Getenv("GITHUB_TOKEN"))
		if cfg.Token == "" {
			return nil, nil
		}
	}
	c, err := github.New(cfg)
	if err != nil {
		diags.AddAttributeError(path.Root("github"), "Invalid GitHub settings", err.Error())
		return nil, diags
	}
	return c, diags
}
