package emulator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Through the front, a launch template's tags reach the SDK, whatever
// emulator is behind it: against MiniStack 1.4.21, which writes them in
// <tags> instead of EC2's tagSet, only thanks to the front's workaround.
func TestFront_LaunchTemplateTags(t *testing.T) {
	ctx, c := emulatorEC2(t)
	name := "front-tags-" + randomHex(4)
	out, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceTypeT3Micro},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: aws.String("ec2runners:pool"), Value: aws.String(name)},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.LaunchTemplate.LaunchTemplateId)
	t.Cleanup(func() {
		if _, err := c.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)}); err != nil {
			t.Errorf("deleting launch template %s: %v", id, err)
		}
	})
	wantTags := fmt.Sprintf("[ec2runners:pool=%s]", name)
	if got := tagString(out.LaunchTemplate.Tags); got != wantTags {
		t.Errorf("CreateLaunchTemplate answered tags %s, want %s", got, wantTags)
	}
	found, err := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if len(found.LaunchTemplates) != 1 || tagString(found.LaunchTemplates[0].Tags) != wantTags {
		t.Errorf("DescribeLaunchTemplates found %+v, want %s tagged %s", found.LaunchTemplates, id, wantTags)
	}
}

func tagString(tags []ec2types.Tag) string {
	s := "["
	for i, t := range tags {
		if i > 0 {
			s += " "
		}
		s += aws.ToString(t.Key) + "=" + aws.ToString(t.Value)
	}
	return s + "]"
}

// The front tells MiniStack by its health endpoint and fixes its launch
// templates' tags (a stand-in answering as MiniStack 1.4.21 does); in front
// of any other emulator it leaves the same answer untouched.
func TestFront_MiniStackLaunchTemplateTags(t *testing.T) {
	const answer = `<?xml version="1.0" encoding="UTF-8"?>
<DescribeLaunchTemplatesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <launchTemplates><item>
            <launchTemplateId>lt-0123</launchTemplateId>
            <launchTemplateName>tags</launchTemplateName>
            <defaultVersionNumber>1</defaultVersionNumber>
            <latestVersionNumber>1</latestVersionNumber>
            <tags><item><key>ec2runners:pool</key><value>&lt;tags&gt;</value></item></tags>
        </item></launchTemplates>
    <requestId>req-1</requestId>
</DescribeLaunchTemplatesResponse>`
	for _, tc := range []struct {
		name      string
		ministack bool
		want      string
	}{
		{"MiniStack", true, "[ec2runners:pool=<tags>]"},
		{"another emulator", false, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var healthChecks atomic.Int32
			stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet && r.URL.Path == "/_ministack/health" {
					healthChecks.Add(1)
					if !tc.ministack {
						http.NotFound(w, r)
						return
					}
					io.WriteString(w, `{"services": {"ec2": "available", "sqs": "available"}, "edition": "light", "version": "dev"}`)
					return
				}
				body, _ := io.ReadAll(r.Body)
				form, _ := url.ParseQuery(string(body))
				if form.Get("Action") != "DescribeLaunchTemplates" {
					http.Error(w, "unexpected "+form.Get("Action"), http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "text/xml")
				io.WriteString(w, answer)
			}))
			defer stub.Close()
			t.Setenv("AWS_ENDPOINT_URL", stub.URL)
			endpoint, stop, err := Ensure(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			c := ec2.New(ec2.Options{
				Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
				Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
			})
			out, err := c.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{"lt-0123"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.LaunchTemplates) != 1 || tagString(out.LaunchTemplates[0].Tags) != tc.want {
				t.Errorf("found %+v, want lt-0123 tagged %s", out.LaunchTemplates, tc.want)
			}
			if healthChecks.Load() != 1 {
				t.Errorf("%d health checks, want one, at Ensure", healthChecks.Load())
			}
		})
	}
}
