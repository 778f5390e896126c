package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// TestMain prints the summary table after the benchmarks ran, and lets go
// of the emulator if a benchmark started (or joined) one. Without -bench no
// benchmark runs, nothing is started, and the package's tests take
// milliseconds.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if s := summary.markdown(); s != "" {
		fmt.Print("\n" + s)
		if path := os.Getenv("EC2RUNNERS_BENCH_SUMMARY"); path != "" {
			if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "writing the summary:", err)
			}
		}
	}
	if theEnv != nil {
		theEnv.stop()
	}
	os.Exit(code)
}

// env is the emulator and the clients the benchmarks share. It is made on
// first use by a benchmark.
type env struct {
	endpoint string
	stop     func()
	cfg      aws.Config
	// Uncounted clients: seeding, simulated agents, cleanup.
	db  *dynamodb.Client
	sqs *sqs.Client
	ec2 *ec2.Client
	sts *sts.Client // pools are created with the caller's account in their runners' ARNs
}

var (
	envOnce sync.Once
	theEnv  *env
	envErr  error
)

// getEnv starts (or joins) the emulator on first use.
func getEnv(b *testing.B) *env {
	b.Helper()
	envOnce.Do(func() {
		ctx := context.Background()
		for k, v := range map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"} {
			if os.Getenv(k) == "" {
				os.Setenv(k, v)
			}
		}
		endpoint, stop, err := emulator.Ensure(ctx)
		if err != nil {
			envErr = err
			return
		}
		cfg, err := awsconfig.Load(ctx, awsconfig.Options{})
		if err != nil {
			stop()
			envErr = err
			return
		}
		e := &env{endpoint: endpoint, stop: stop, cfg: cfg}
		e.db, e.sqs, e.ec2 = e.clients(cfg)
		e.sts = sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = aws.String(endpoint) })
		theEnv = e
	})
	if envErr != nil {
		b.Fatalf("emulator: %v", envErr)
	}
	return theEnv
}

func (e *env) clients(cfg aws.Config) (*dynamodb.Client, *sqs.Client, *ec2.Client) {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(e.endpoint) }),
		sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(e.endpoint) }),
		ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(e.endpoint) })
}

// manager manages pools with the uncounted clients.
func (e *env) manager() *pool.Manager {
	return &pool.Manager{DynamoDB: e.db, SQS: e.sqs, EC2: e.ec2, STS: e.sts, Region: e.cfg.Region}
}

// counted returns clients whose calls c counts.
func (e *env) counted(c *Counter) (*dynamodb.Client, *sqs.Client, *ec2.Client) {
	return e.clients(c.Attach(e.cfg))
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
