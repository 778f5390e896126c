package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Settings are a broker function's, from its environment.
type Settings struct {
	Pool     string // EC2RUNNERS_POOL: the one pool it serves
	Audience string // EC2RUNNERS_AUDIENCE: of the tokens it takes ("": DefaultAudience)
	// Issuer is EC2RUNNERS_OIDC_ISSUER, for tests only ("": DefaultIssuer).
	Issuer string
	// GitHubAPI is GITHUB_API_URL, the GitHub API the pool's credential
	// is for ("": github.com's).
	GitHubAPI string
	Version   string // the release's, for the User-Agent of its requests
}

// SettingsFromEnv reads the settings from the environment.
func SettingsFromEnv(version string) (Settings, error) {
	s := Settings{Pool: os.Getenv("EC2RUNNERS_POOL"), Audience: os.Getenv("EC2RUNNERS_AUDIENCE"),
		Issuer: os.Getenv("EC2RUNNERS_OIDC_ISSUER"), GitHubAPI: os.Getenv("GITHUB_API_URL"), Version: version}
	if err := protocol.ValidatePoolName(s.Pool); err != nil {
		return s, fmt.Errorf("EC2RUNNERS_POOL: %w", err)
	}
	return s, nil
}

// NewService is the broker function's service: AWS clients from the SDK's
// default configuration (which honours AWS_ENDPOINT_URL), a claim.Claimer
// with the pool's stored GitHub credential and metrics as the provider
// publishes them, and a Registrar minting with that credential. log
// receives what the pool logic logs.
func NewService(ctx context.Context, s Settings, log claim.Logger) (*Service, error) {
	clients, err := awsconfig.New(ctx, awsconfig.Options{ProviderVersion: s.Version})
	if err != nil {
		return nil, err
	}
	base := claim.Claimer{DynamoDB: clients.DynamoDB, SQS: clients.SQS, EC2: clients.EC2,
		Metrics: &metrics.Publisher{Logs: clients.Logs}, Log: log}
	creds := &credentials{read: func() *claim.StoredGitHub {
		return &claim.StoredGitHub{SSM: clients.SSM, SecretsManager: clients.SecretsManager,
			Client: github.Config{BaseURL: s.GitHubAPI, Version: s.Version}}
	}}
	claimer := func(warn func(summary, detail string)) *claim.Claimer {
		c := base
		c.StoredGitHub, c.Warn = creds.current(), warn
		return &c
	}
	maintenance := &Maintenance{Pool: s.Pool, Claimer: claimer, Timings: claim.DefaultTimings(), Log: log}
	claims := &Handler{
		Pool: s.Pool, Verifier: NewVerifier(s.Issuer, s.Audience), DynamoDB: clients.DynamoDB, Log: log,
		Claimer:     func(warn func(summary, detail string)) Claimer { return claimer(warn) },
		Maintenance: maintenance,
	}
	agents := &Registrar{DynamoDB: clients.DynamoDB, Pool: s.Pool,
		GitHub: func(ctx context.Context) (claim.JITRunners, error) {
			cfg, err := pool.ReadConfig(ctx, clients.DynamoDB, s.Pool)
			if err != nil {
				return nil, err
			}
			if cfg.GitHubCredential == nil {
				return nil, fmt.Errorf("pool %s keeps no GitHub credential (its github_credential is not set): the broker cannot register its runners", s.Pool)
			}
			access, err := creds.current().Access(ctx, *cfg.GitHubCredential)
			if err != nil {
				return nil, err
			}
			return access.JIT, nil
		},
	}
	return &Service{Claims: claims, Agents: agents, Maintenance: maintenance}, nil
}

// Service is the broker's function: one entry for the claims workflows
// make (Request, with the job's OIDC token), the agents' requests for
// their runners' registrations (AgentRequest, with the grant's secret)
// and the pool's scheduled maintenance (OpMaintain).
type Service struct {
	Claims      *Handler
	Agents      *Registrar
	Maintenance *Maintenance
}

// Serve answers one invocation's payload, told apart by its operation.
// Whatever went wrong is in the answer's error, never a failed invocation.
func (s *Service) Serve(ctx context.Context, payload []byte) any {
	var op struct {
		Operation string `json:"operation"`
	}
	if err := json.Unmarshal(payload, &op); err != nil {
		return invalid("the payload is not a JSON object with an operation: %v", err)
	}
	if op.Operation == OpMaintain {
		return s.Maintenance.Serve(ctx)
	}
	if op.Operation == OpRegister || op.Operation == OpDeregister {
		var req AgentRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return AgentResponse{Error: &Error{Kind: ErrorInvalid, Message: fmt.Sprintf("the %s request: %v", op.Operation, err)}}
		}
		return s.Agents.Serve(ctx, req)
	}
	var req Request
	if err := json.Unmarshal(payload, &req); err != nil {
		return invalid("the %s request: %v", op.Operation, err)
	}
	return s.Claims.Handle(ctx, req)
}

// credentialLifetime is how long the broker uses the GitHub credential it
// read (and the GitHub App installation token made with it) before reading
// it again: a Lambda function's container lives for hours, and a rotated
// credential takes effect within this.
const credentialLifetime = 10 * time.Minute

// credentials hands out the StoredGitHub of the pool's credential, read
// again once credentialLifetime passed (a StoredGitHub keeps what it read
// for its life).
type credentials struct {
	read func() *claim.StoredGitHub

	mu   sync.Mutex
	kept *claim.StoredGitHub
	at   time.Time
}

func (c *credentials) current() *claim.StoredGitHub {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kept == nil || time.Since(c.at) >= credentialLifetime {
		c.kept, c.at = c.read(), time.Now()
	}
	return c.kept
}
