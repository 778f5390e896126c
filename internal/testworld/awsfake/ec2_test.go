package awsfake

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// RunInstances refuses user data as EC2 does (the emulator's front answers
// the same, internal/testworld/emulator): more than 16384 bytes before base64, or text
// that is not base64, with EC2's code and message; exactly 16384 bytes
// launch.
func TestEC2_RunInstancesUserData(t *testing.T) {
	e := &EC2{}
	run := func(userData string) (*ec2.RunInstancesOutput, error) {
		return e.RunInstances(context.Background(), &ec2.RunInstancesInput{
			ImageId: aws.String("ami-1"), MinCount: aws.Int32(2), MaxCount: aws.Int32(2), UserData: aws.String(userData),
		})
	}
	of := func(n int) string { return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("#", n))) }
	for _, tc := range []struct{ what, userData, message string }{
		{"16385 bytes", of(16385), "User data is limited to 16384 bytes"},
		{"not base64", "#!/bin/sh\n", "Invalid BASE64 encoding of user data"},
	} {
		_, err := run(tc.userData)
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidParameterValue" || apiErr.ErrorMessage() != tc.message {
			t.Errorf("%s: %v, want InvalidParameterValue: %s", tc.what, err, tc.message)
		}
	}
	if len(e.Live) != 0 || len(e.Runs) != 0 {
		t.Fatalf("refused launches ran instances: %v", e.Live)
	}
	out, err := run(of(16384))
	if err != nil || len(out.Instances) != 2 || len(e.Live) != 2 {
		t.Fatalf("16384 bytes: %v, %v; want 2 instances launched (live: %v)", out, err, e.Live)
	}
}
