package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Emulators other than moto have bugs of their own: answers that are not
// what AWS answers to the same valid request. The front works around the
// ones the tests meet, for the emulator it found behind it (detect), so
// that the tests see AWS's answer; the provider itself never works around
// an emulator. Each is listed in CONTRIBUTING.md ("Other emulators"),
// with the evidence.

// quirk is one emulator bug the front works around.
type quirk struct {
	name string // what it is, for logs and tests
	// service and actions of the requests whose answers it fixes.
	service string
	actions []string
	// fix rewrites a successful answer's body.
	fix func(body []byte) []byte
}

// quirked tells whether a quirk fixes answers of service.
func quirked(quirks []quirk, service string) bool {
	return slices.ContainsFunc(quirks, func(q quirk) bool { return q.service == service })
}

// fixOf is the fix of the answer to a request to service (its header and
// body), or nil if no quirk applies. Quirks are of the query protocol's
// services (EC2): the action is the form's.
func fixOf(quirks []quirk, service string, h http.Header, body []byte) func([]byte) []byte {
	if !quirked(quirks, service) || !strings.HasPrefix(h.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil
	}
	var fixes []func([]byte) []byte
	for _, q := range quirks {
		if q.service == service && slices.Contains(q.actions, form.Get("Action")) {
			fixes = append(fixes, q.fix)
		}
	}
	if len(fixes) == 0 {
		return nil
	}
	return func(body []byte) []byte {
		for _, fix := range fixes {
			body = fix(body)
		}
		return body
	}
}

// Emulators detect tells apart.
const (
	emulatorOther     = ""          // moto, LocalStack, or one we do not know
	emulatorMiniStack = "MiniStack" // github.com/ministackorg/ministack
)

// quirksOf are the workarounds for an emulator.
func quirksOf(emulator string) []quirk {
	if emulator == emulatorMiniStack {
		return miniStackQuirks
	}
	return nil
}

// names lists what quirks work around, for the log.
func names(quirks []quirk) string {
	var out []string
	for _, q := range quirks {
		out = append(out, q.name)
	}
	return strings.Join(out, "; ")
}

// miniStackQuirks: MiniStack 1.4.21.
var miniStackQuirks = []quirk{{
	// EC2's LaunchTemplate carries its tags in tagSet
	// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplate.html),
	// which is what every SDK reads; MiniStack's CreateLaunchTemplate and
	// DescribeLaunchTemplates write them in <tags> (services/ec2.py), so
	// every client sees a launch template without tags: the claims'
	// check of the template's ec2runners:pool tag fails, and the sweepers
	// find no template by its tags.
	name:    "launch template tags in <tags> instead of <tagSet>",
	service: "ec2",
	actions: []string{"CreateLaunchTemplate", "DescribeLaunchTemplates"},
	fix:     renameElement("tags", "tagSet"),
}}

// renameElement renames every element from to to in an XML answer. Text
// in the answer is escaped, so only elements match.
func renameElement(from, to string) func([]byte) []byte {
	r := strings.NewReplacer("<"+from+">", "<"+to+">", "</"+from+">", "</"+to+">", "<"+from+"/>", "<"+to+"/>")
	return func(body []byte) []byte { return []byte(r.Replace(string(body))) }
}

// detect tells which emulator answers at target: MiniStack answers GET
// /_ministack/health with its services; anything else is emulatorOther.
func detect(ctx context.Context, target string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(target, "/")+"/_ministack/health", nil)
	if err != nil {
		return emulatorOther
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return emulatorOther
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return emulatorOther
	}
	var health struct {
		Services map[string]string `json:"services"`
	}
	if json.Unmarshal(body, &health) != nil || len(health.Services) == 0 {
		return emulatorOther
	}
	return emulatorMiniStack
}

// fixAnswer applies fix to a successful, unencoded answer.
func fixAnswer(resp *http.Response, fix func([]byte) []byte) error {
	if resp.StatusCode/100 != 2 || (resp.Header.Get("Content-Encoding") != "" && resp.Header.Get("Content-Encoding") != "identity") {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	body = fix(body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}
