package scripttest

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
)

// Env is what the agents of one test talk to.
type Env struct {
	Endpoint string // the emulator's
	Region   string
	Proxy    *SigV4Proxy
	GitHub   *GitHub
}

// NewEnv starts the stub GitHub and the signature-checking proxy in front of
// the emulator at endpoint.
func NewEnv(t testing.TB, endpoint, region string) *Env {
	return &Env{Endpoint: endpoint, Region: region, Proxy: NewSigV4Proxy(t, endpoint), GitHub: NewGitHub(t)}
}

// Options renders the script for this machine: the stub GitHub, short
// intervals and the signature-checking proxy. StartInstance chooses the
// runner user and the paths.
func (e *Env) Options(pool, owner, repository string) agentscript.Options {
	return agentscript.Options{
		Pool:                 pool,
		Region:               e.Region,
		GitHubURL:            e.GitHub.URL,
		GitHubOwner:          owner,
		GitHubRepository:     repository,
		RunnerVersion:        agentscript.DefaultRunnerVersion,
		RunnerDownloadURL:    e.GitHub.RunnerDownloadURL(),
		HeartbeatInterval:    time.Second,
		SelfCheckInterval:    time.Second,
		SelfTerminationGrace: 2 * time.Second,
		ClaimPollInterval:    250 * time.Millisecond,
		ReleasePollInterval:  500 * time.Millisecond,
		AWSEndpointURL:       e.Proxy.URL,
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// emulatorEC2 reaches the emulator's EC2 with the tests' own credentials,
// whose calls awsrecord does not record.
func (e *Env) emulatorEC2() *ec2.Client {
	return ec2.New(ec2.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}
