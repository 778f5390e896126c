package emulator

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// The front refuses what EC2 refuses, with EC2's own status, code and
// message, through the real SDK client, whatever emulator is behind it. One
// test per rule of internal/awslimits; the expected answers are written out
// here as EC2 gives them, not taken from the rules.

// EC2 takes at most 16384 bytes of user data (before base64) in
// RunInstances, and refuses text that is not base64.
func TestFront_RunInstancesUserData(t *testing.T) {
	ctx, c := emulatorEC2(t)
	image, err := Image(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	run := func(userData string) error {
		out, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
			ImageId: aws.String(image), InstanceType: ec2types.InstanceTypeT3Micro,
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), UserData: aws.String(userData),
		})
		if err == nil {
			id := aws.ToString(out.Instances[0].InstanceId)
			t.Cleanup(func() {
				if _, err := c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
					t.Errorf("terminating %s: %v", id, err)
				}
			})
		}
		return err
	}
	wantRefusal(t, "16385 bytes", run(userData(16385)), "InvalidParameterValue", "User data is limited to 16384 bytes")
	wantRefusal(t, "not base64", run("#!/bin/sh\necho hi\n"), "InvalidParameterValue", "Invalid BASE64 encoding of user data")
	if err := run(userData(16384)); err != nil {
		t.Errorf("16384 bytes of user data: %v, want the instance launched", err)
	}
}

// CreateLaunchTemplate and CreateLaunchTemplateVersion take the same 16384
// bytes in LaunchTemplateData.UserData, and answer otherwise.
func TestFront_LaunchTemplateUserData(t *testing.T) {
	ctx, c := emulatorEC2(t)
	name := "front-test-" + randomHex(4)
	create := func(userData string) error {
		_, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String(userData)},
		})
		return err
	}
	version := func(userData string) error {
		_, err := c.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{
			LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String(userData)},
		})
		return err
	}
	const code, tooLong, notBase64 = "InvalidUserData.Malformed", "User data is limited to 16384 bytes.", "Invalid BASE64 encoding of user data."
	wantRefusal(t, "CreateLaunchTemplate of 16385 bytes", create(userData(16385)), code, tooLong)
	wantRefusal(t, "CreateLaunchTemplate not base64", create("#!/bin/sh\n"), code, notBase64)
	if err := create(userData(16384)); err != nil {
		t.Fatalf("CreateLaunchTemplate of 16384 bytes: %v, want it created", err)
	}
	t.Cleanup(func() {
		if _, err := c.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)}); err != nil {
			t.Errorf("deleting launch template %s: %v", name, err)
		}
	})
	wantRefusal(t, "CreateLaunchTemplateVersion of 16385 bytes", version(userData(16385)), code, tooLong)
	wantRefusal(t, "CreateLaunchTemplateVersion not base64", version("#!/bin/sh\n"), code, notBase64)
	if err := version(userData(16384)); err != nil {
		t.Errorf("CreateLaunchTemplateVersion of 16384 bytes: %v, want it created", err)
	}
}

// emulatorEC2 is an EC2 client of Ensure's endpoint, until the test's end.
func emulatorEC2(t *testing.T) (context.Context, *ec2.Client) {
	t.Helper()
	startup, cancel := context.WithTimeout(context.Background(), await.Patience)
	defer cancel()
	endpoint, stop, err := Ensure(startup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop) // after the test's own cleanups, registered later
	return t.Context(), ec2.New(ec2.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// userData is n bytes of a shell script, base64-encoded as EC2 takes it.
func userData(n int) string {
	script := "#!/bin/sh\n" + strings.Repeat("#", n)
	return base64.StdEncoding.EncodeToString([]byte(script[:n]))
}

// wantRefusal checks err is EC2's refusal: HTTP 400 with code and message.
func wantRefusal(t *testing.T, what string, err error, code, message string) {
	t.Helper()
	var apiErr smithy.APIError
	var httpErr *awshttp.ResponseError
	if !errors.As(err, &apiErr) || !errors.As(err, &httpErr) {
		t.Errorf("%s: %v, want EC2's refusal %s: %s", what, err, code, message)
		return
	}
	if status := httpErr.HTTPStatusCode(); status != http.StatusBadRequest || apiErr.ErrorCode() != code || apiErr.ErrorMessage() != message {
		t.Errorf("%s: HTTP %d %s: %q, want HTTP 400 %s: %q", what, status, apiErr.ErrorCode(), apiErr.ErrorMessage(), code, message)
	}
}
