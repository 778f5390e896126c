// Command simagents runs simulated runner agents for one pool, for the demo:
// the emulator boots no real instance, so something has to play the agents.
//
// It starts a Healthy agent for every instance a claim's fleet or a fill of
// the pool's targets launches (instances tagged ec2runners:pool=<pool>) and
// for every instance that has a non-terminated instance record in the pool's
// table, at start and later, until SIGINT or SIGTERM. The agent of a stopped
// instance waits for it to be started again, and then boots. Each agent
// event is printed as one line starting with "agent"; errors go to stderr.
//
//	go run ./internal/testworld/agentsim/cmd/simagents -pool demo
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "simagents:", err)
		os.Exit(1)
	}
}

func run() error {
	defEndpoint := os.Getenv("AWS_ENDPOINT_URL")
	if defEndpoint == "" {
		defEndpoint = "http://127.0.0.1:4566"
	}
	var (
		pool      = flag.String("pool", "", "pool name (required)")
		endpoint  = flag.String("endpoint", defEndpoint, "AWS endpoint (the emulator); region us-east-1 and credentials test/test unless set in the environment")
		heartbeat = flag.Duration("heartbeat", 5*time.Second, "heartbeat interval")
		poll      = flag.Duration("poll", 10*time.Second, "record poll interval while registered")
		wait      = flag.Duration("wait", 250*time.Millisecond, "record poll interval while waiting for a run")
		selfCheck = flag.Duration("self-check", 15*time.Second, "self-check interval; also how often the agent of a stopped instance looks whether it was started")
		grace     = flag.Duration("grace", time.Minute, "how long past its record's threshold an agent lets its instance run before it stops or terminates it")
		bootDelay = flag.Duration("boot-delay", time.Second, "how long a stopped instance takes to boot once started again, before its agent runs")
		scan      = flag.Duration("scan", 2*time.Second, "interval between scans of the pool's instance records for instances to adopt")
	)
	flag.Parse()
	if err := protocol.ValidatePoolName(*pool); err != nil {
		flag.Usage()
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var opts []func(*config.LoadOptions) error
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return err
	}
	ep := aws.String(*endpoint)
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = ep })
	ec2c := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = ep })
	sqsc := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = ep })

	var outMu sync.Mutex
	sim := agentsim.New(agentsim.Clients{DynamoDB: ddb, EC2: ec2c, SQS: sqsc}, *pool, agentsim.Options{
		HeartbeatInterval:    *heartbeat,
		PollInterval:         *poll,
		WaitInterval:         *wait,
		SelfCheckInterval:    *selfCheck,
		SelfTerminationGrace: *grace,
		BootDelay:            *bootDelay,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "simagents: "+format+"\n", args...)
		},
		OnEvent: func(e agentsim.Event) {
			outMu.Lock()
			defer outMu.Unlock()
			fmt.Println(describe(e))
		},
	})
	fmt.Fprintf(os.Stderr, "simagents: running agents for pool %s at %s; Ctrl-C stops\n", *pool, *endpoint)
	sim.WatchFleet(ctx, nil)
	adopt(ctx, sim, ddb, *pool, *scan)
	sim.Stop()
	return nil
}

// describe renders an event as one line starting with "agent".
func describe(e agentsim.Event) string {
	p := "agent " + e.InstanceID + ": "
	switch e.Kind {
	case agentsim.EventStarted:
		return p + "started (" + e.Detail + ")"
	case agentsim.EventUserDataOK:
		return p + "user data done (UD_OK) for " + e.RunID
	case agentsim.EventRegistered:
		return p + "registered for run " + e.RunID
	case agentsim.EventRegistrationFailed:
		return p + "registration failed for run " + e.RunID
	case agentsim.EventReleased:
		return p + "released run " + e.RunID
	case agentsim.EventReleaseSilent:
		return p + "left run " + e.RunID + " without confirming the release"
	case agentsim.EventSelfTerminated:
		return p + "terminated itself: " + e.Detail
	case agentsim.EventStoppedSelf:
		return p + "stopped its instance: " + e.Detail
	case agentsim.EventResumed:
		return p + "resumed: " + e.Detail
	case agentsim.EventStopped:
		return p + "stopped: " + e.Detail
	}
	return p + string(e.Kind) + " " + e.RunID + " " + e.Detail
}

// adopt starts an agent for every non-terminated instance record of the pool,
// now and every interval, until ctx is done.
func adopt(ctx context.Context, sim *agentsim.Sim, ddb *dynamodb.Client, pool string, every time.Duration) {
	lastErr := ""
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ids, err := liveRecords(ctx, ddb, pool)
		switch {
		case err != nil && ctx.Err() == nil && agentsim.ErrorKey(err) != lastErr:
			lastErr = agentsim.ErrorKey(err)
			fmt.Fprintf(os.Stderr, "simagents: reading the instance records of pool %s: %v (retrying)\n", pool, err)
		case err == nil:
			lastErr = ""
		}
		for _, id := range ids {
			sim.Start(ctx, id, agentsim.Healthy)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// liveRecords lists the instance ids of the pool's non-terminated records.
func liveRecords(ctx context.Context, ddb *dynamodb.Client, pool string) ([]string, error) {
	var ids []string
	err := table.Partition(ctx, ddb, protocol.TableName(pool), protocol.TypeInstance, func(item table.Item) error {
		if id := protocol.StringAttr(item, protocol.AttrIdentifier); id != "" && protocol.StringAttr(item, protocol.AttrState) != protocol.StateTerminated {
			ids = append(ids, id)
		}
		return nil
	})
	return ids, err
}
