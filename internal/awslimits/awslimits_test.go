package awslimits

import (
	"encoding/base64"
	"strings"
	"testing"
)

// A rule applies to its service's actions and parameter only, and every
// rule names its source. (Each rule's refusal is tested through the
// emulator's front, internal/emulator, and the fakes, internal/awsfake.)
func TestCheck_onlyItsActionsAndParameter(t *testing.T) {
	tooLong := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("#", MaxUserDataBytes+1)))
	params := func(have map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) { v, ok := have[name]; return v, ok }
	}
	for _, tc := range []struct {
		service, action string
		params          map[string]string
		refused         bool
	}{
		{"ec2", "RunInstances", map[string]string{"UserData": tooLong}, true},
		{"ec2", "RunInstances", map[string]string{}, false},
		{"ec2", "RunInstances", map[string]string{"LaunchTemplateData.UserData": tooLong}, false},
		{"ec2", "CreateLaunchTemplateVersion", map[string]string{"LaunchTemplateData.UserData": tooLong}, true},
		{"ec2", "DescribeInstances", map[string]string{"UserData": tooLong}, false},
		{"sqs", "RunInstances", map[string]string{"UserData": tooLong}, false},
	} {
		if got := Check(tc.service, tc.action, params(tc.params)) != nil; got != tc.refused {
			t.Errorf("%s %s %v: refused %v, want %v", tc.service, tc.action, tc.params, got, tc.refused)
		}
	}
	if !Watches("ec2") || Watches("sqs") || Watches("dynamodb") {
		t.Error("Watches: want ec2 only, the one service with rules")
	}
	for _, r := range Rules {
		if r.Source == "" || r.Check == nil || r.Param == "" || len(r.Actions) == 0 {
			t.Errorf("rule %s %v %s: incomplete (a check, a parameter, actions and a source each)", r.Service, r.Actions, r.Param)
		}
	}
}
