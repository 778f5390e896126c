package release

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/agentsim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// world is the emulator side of the test: a launch template and subnets for
// the pool's fleet, simulated agents for the pool's instances, and a proxy
// in front of the emulator that records the User-Agent of every request the
// provider sends through it.
type world struct {
	pool           string
	launchTemplate string
	subnets        []string
	sim            *agentsim.Sim
	proxy          *httptest.Server

	mu     sync.Mutex
	agents []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	w := &world{pool: "release-" + hex.EncodeToString(b)}
	clients, err := awsconfig.New(ctx, awsconfig.Options{
		Region: region, AccessKey: "test", SecretKey: "test",
		Endpoints: awsconfig.Endpoints{SQS: endpoint, DynamoDB: endpoint, EC2: endpoint, STS: endpoint},
	})
	if err != nil {
		t.Fatal(err)
	}
	// An image the emulator offers (moto's and LocalStack's differ), in a
	// launch template tagged for the pool: claims launch no other.
	images, err := clients.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("an x86_64 image for the launch template: %v (%d found)", err, len(images.Images))
	}
	ltID, err := emulator.CreateLaunchTemplate(ctx, clients.EC2, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(w.pool),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: images.Images[0].ImageId},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String(protocol.TagPool), Value: aws.String(w.pool)},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.launchTemplate = ltID
	t.Cleanup(func() {
		_, _ = clients.EC2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(ltID)})
	})
	subnets, err := clients.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("subnets: %v", err)
	}
	w.subnets = []string{aws.ToString(subnets.Subnets[0].SubnetId)}

	w.sim = agentsim.New(agentsim.Clients{DynamoDB: clients.DynamoDB, EC2: clients.EC2, SQS: clients.SQS}, w.pool, agentsim.Options{
		HeartbeatInterval: time.Second, PollInterval: 250 * time.Millisecond, SelfCheckInterval: 5 * time.Second, Logf: t.Logf,
	})
	w.sim.WatchFleet(ctx, nil)
	t.Cleanup(w.sim.Stop)

	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	w.proxy = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.agents = append(w.agents, r.Header.Get("User-Agent"))
		w.mu.Unlock()
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.proxy.Close)
	return w
}

func (w *world) userAgents() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.agents)
}

func jsonList(values []string) string {
	b, _ := json.Marshal(values)
	return string(b)
}
