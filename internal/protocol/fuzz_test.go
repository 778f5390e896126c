package protocol

// Fuzz targets for everything the protocol reads from AWS or from users.
// `go test` runs their seeds and testdata/fuzz/<FuzzName>; `make fuzz` runs
// the fuzzers themselves for a while.

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ---------------------------------------------------------------- messages

func FuzzParseMessage(f *testing.F) {
	swap := func(old, new string) string { return strings.Replace(protocolBody, old, new, 1) }
	for _, body := range []string{
		protocolBody,
		protocolMessage.Body(),
		`{"id":"i-1","resourceClass":"16xlarge","instanceType":"m7g.16xlarge","cpu":64,"mmem":262144,"usageClass":"spot","threshold":"2030-01-01T00:00:00Z"}`,
		// Field names match case-insensitively in encoding/json.
		`{"ID":"i-0abc","ResourceClass":"large","INSTANCETYPE":"c6i.large","Cpu":2,"MMEM":4096,"usageclass":"on-demand","Threshold":"2026-06-01T12:00:00Z"}`,
		// Duplicate keys: the last wins.
		`{"id":"i-1","id":"","resourceClass":"large","instanceType":"c6i.large","cpu":2,"mmem":4096,"usageClass":"on-demand","threshold":"2026-06-01T12:00:00Z"}`,
		// Unknown fields are ignored.
		swap(`"id":"i-0abc"`, `"id":"i-0abc","extra":{"nested":[1,2,{"x":null}]}`),
		"", " ", "{", "}", "{}", "[]", "null", "true", "0", `"i-0abc"`, "not json", "\x00", "\xff\xfe",
		protocolBody + "garbage", protocolBody + " ", " \n\t" + protocolBody,
		swap(`"cpu":2`, `"cpu":"2"`),
		swap(`"cpu":2`, `"cpu":2.0`),
		swap(`"cpu":2`, `"cpu":1e1`),
		swap(`"cpu":2`, `"cpu":-2`),
		swap(`"cpu":2`, `"cpu":0`),
		swap(`"cpu":2`, `"cpu":9223372036854775807`),
		swap(`"cpu":2`, `"cpu":9223372036854775808`),
		swap(`"cpu":2`, `"cpu":1e400`),
		swap(`"cpu":2`, `"cpu":null`),
		swap(`"mmem":4096`, `"mmem":4096.5`),
		swap(`"id":"i-0abc"`, `"id":7`),
		swap(`"id":"i-0abc"`, `"id":["i-0abc"]`),
		swap(`"id":"i-0abc"`, `"id":"i-\u00e9\ud83d\ude00"`),
		swap(`"id":"i-0abc"`, `"id":"i-\ud800"`),   // lone surrogate
		swap(`"id":"i-0abc"`, "\"id\":\"i-\xff\""), // invalid UTF-8
		swap(`"id":"i-0abc"`, `"id":"<script>&amp;"`),
		swap(`"id":"i-0abc"`, `"id":"`+strings.Repeat("i", 4096)+`"`),
		swap("2026-06-01T12:00:00Z", "2026-06-01T12:00:00.5Z"),
		swap("2026-06-01T12:00:00Z", "2026-06-01T14:00:00+02:00"),
		swap("2026-06-01T12:00:00Z", "2026-02-30T12:00:00Z"),
		swap("2026-06-01T12:00:00Z", "9999-12-31T23:59:59Z"),
		swap("2026-06-01T12:00:00Z", "0000-01-01T00:00:00Z"),
		swap("2026-06-01T12:00:00Z", ""),
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := ParseMessage(body)
		if err != nil {
			if m != (Message{}) {
				t.Errorf("ParseMessage(%q) returned %+v with its error", body, m)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "not a runner message") && !strings.HasPrefix(msg, "runner message ") {
				t.Errorf("ParseMessage(%q) error %q does not say it is about a runner message", body, msg)
			}
			return
		}
		// Every field is required.
		if m.ID == "" || m.ResourceClass == "" || m.InstanceType == "" || m.UsageClass == "" || m.CPU <= 0 || m.MemoryMiB <= 0 {
			t.Fatalf("ParseMessage(%q) = %+v: a required field is empty", body, m)
		}
		ts, err := ParseTime(m.Threshold)
		if err != nil || FormatTime(ts) != m.Threshold {
			t.Fatalf("ParseMessage(%q) accepted threshold %q (%v)", body, m.Threshold, err)
		}
		// The body is a JSON object.
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			t.Fatalf("ParseMessage(%q) accepted a body that is not a JSON object: %v", body, err)
		}
		// Rendering and parsing again gives the same message, and the
		// rendering is stable.
		rendered := m.Body()
		back, err := ParseMessage(rendered)
		if err != nil {
			t.Fatalf("ParseMessage(%q.Body() = %q) = %v", body, rendered, err)
		}
		if back != m {
			t.Fatalf("round trip of %q: %+v, then %+v", body, m, back)
		}
		if again := back.Body(); again != rendered {
			t.Fatalf("Body() not stable: %q, then %q", rendered, again)
		}
	})
}

// ---------------------------------------------------------------- timestamps

var wireTimeFields = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z$`)

// referenceTime is an independent reading of PROTOCOL.md's timestamp rule:
// exactly YYYY-MM-DDTHH:MM:SSZ, with a real calendar date and time of day.
func referenceTime(s string) (time.Time, bool) {
	m := wireTimeFields.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	n := make([]int, 6)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	year, month, day, hour, minute, second := n[0], n[1], n[2], n[3], n[4], n[5]
	if month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, second, 0, time.UTC)
	if t.Day() != day { // 30 February and the like roll over
		return time.Time{}, false
	}
	return t, true
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		"2026-06-01T12:00:00Z", "1970-01-01T00:00:00Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
		"2028-02-29T00:00:00Z", "2026-02-29T00:00:00Z", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
		"2026-06-00T00:00:00Z", "2026-06-31T00:00:00Z", "2026-06-01T24:00:00Z", "2026-06-01T23:60:00Z", "2026-06-01T23:59:60Z",
		"2026-06-01T12:00:00.5Z", "2026-06-01T12:00:00.000Z", "2026-06-01T12:00:00,5Z",
		"2026-06-01T12:00:00", "2026-06-01 12:00:00Z", "2026-06-01T12:00:00+00:00", "2026-06-01T14:00:00+02:00",
		"2026-06-01T12:00:00z", "2026-06-01t12:00:00Z", "2026-6-1T12:00:00Z", "2026-06-01T1:00:00Z", "+2026-06-01T12:00:00Z",
		"-2026-06-01T12:00:00Z", "12026-06-01T12:00:00Z", "2026-06-01T12:00:00ZZ", " 2026-06-01T12:00:00Z", "2026-06-01T12:00:00Z\n",
		"2026-06-01T12:00:00UTC", "Mon, 01 Jun 2026 12:00:00 GMT", "1780315200", "", "Z", "２０２６-06-01T12:00:00Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s)
		want, valid := referenceTime(s)
		if (err == nil) != valid {
			t.Fatalf("ParseTime(%q) = %v, %v; the protocol's format says valid = %v", s, got, err, valid)
		}
		if err != nil {
			if !got.IsZero() {
				t.Errorf("ParseTime(%q) returned %v with its error", s, got)
			}
			return
		}
		if !got.Equal(want) || got.Location() != time.UTC || got.Nanosecond() != 0 {
			t.Errorf("ParseTime(%q) = %v, want %v in UTC", s, got, want)
		}
		if back := FormatTime(got); back != s {
			t.Errorf("FormatTime(ParseTime(%q)) = %q", s, back)
		}
	})
}

// ---------------------------------------------------------------- items

// Attribute shapes the item fuzzers build from a selector.
func fuzzAttr(shape uint8, s string) types.AttributeValue {
	switch shape % 6 {
	case 0, 1: // a string most of the time
		return &types.AttributeValueMemberS{Value: s}
	case 2:
		return nil // absent
	case 3:
		return &types.AttributeValueMemberN{Value: s}
	case 4:
		return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"S": &types.AttributeValueMemberS{Value: s}}}
	default:
		return &types.AttributeValueMemberSS{Value: []string{s}}
	}
}

func setAttr(item map[string]types.AttributeValue, name string, v types.AttributeValue) {
	if v != nil {
		item[name] = v
	}
}

func strIfS(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// validPoolConfig is a pool config document as the provider writes it.
const validPoolConfig = `{"name":"ci-runners","resourceClasses":{"large":{"cpu":2,"memoryMiB":4096},"xlarge":{"cpu":4,"memoryMiB":8192}},` +
	`"idleTimeout":"7m","maxRuntime":"30m","fleet":{"launchTemplateId":"lt-0123456789abcdef0","launchTemplateVersion":"$Default",` +
	`"subnetIds":["subnet-0a1b2c3d"],"instanceSelection":"attribute-based"},` +
	`"queueUrls":{"large":"https://sqs.eu-west-1.amazonaws.com/123456789012/ci-runners-large"},"github":{"owner":"octo","repository":"app"}}`

func FuzzPoolConfigFromItem(f *testing.F) {
	swap := func(old, new string) string { return strings.Replace(validPoolConfig, old, new, 1) }
	for _, doc := range []string{
		validPoolConfig,
		`{"name":"p","resourceClasses":{"large":{"cpu":2,"memoryMiB":4096}},"idleTimeout":"1h","maxRuntime":"6h","queueUrls":{}}`,
		`{"name":"gpu_pool-2","resourceClasses":{"big":{"cpu":8,"memoryMiB":32768}},"idleTimeout":"45s","maxRuntime":"2h0m5s",` +
			`"fleet":{"launchTemplateName":"runner","launchTemplateVersion":"3","subnetIds":["subnet-a","subnet-b"],"instanceSelection":"explicit"},"queueUrls":null}`,
		"", "null", "{}", "[]", `"ci"`, "{", validPoolConfig + "x",
		swap(`"name":"ci-runners"`, `"name":""`),
		swap(`"name":"ci-runners"`, `"name":"my pool"`),
		swap(`"name":"ci-runners"`, `"name":5`),
		swap(`"cpu":2,`, `"cpu":0,`),
		swap(`"cpu":4,`, `"cpu":2,`),
		swap(`"memoryMiB":8192`, `"memoryMiB":4096`),
		swap(`"large":{"cpu":2`, `"my class":{"cpu":2`),
		swap(`"large":{"cpu":2`, `"gpu-big":{"cpu":2`), // a class named before '-' was refused
		swap(`"resourceClasses":{"large":{"cpu":2,"memoryMiB":4096},"xlarge":{"cpu":4,"memoryMiB":8192}}`, `"resourceClasses":{}`),
		swap(`"idleTimeout":"7m"`, `"idleTimeout":"soon"`),
		swap(`"idleTimeout":"7m"`, `"idleTimeout":"-7m"`),
		swap(`"idleTimeout":"7m"`, `"idleTimeout":null`),
		swap(`"idleTimeout":"7m"`, `"idleTimeout":420000000000`),
		swap(`"maxRuntime":"30m"`, `"maxRuntime":"2562047h47m16.854775807s"`),
		swap(`"maxRuntime":"30m"`, `"maxRuntime":"2562048h"`),
		swap(`"maxRuntime":"30m"`, `"maxRuntime":"1.5h"`),
		swap(`"launchTemplateId":"lt-0123456789abcdef0"`, `"launchTemplateId":"lt-1","launchTemplateName":"runners"`),
		swap(`"launchTemplateId":"lt-0123456789abcdef0"`, `"launchTemplateId":""`),
		swap(`"subnetIds":["subnet-0a1b2c3d"]`, `"subnetIds":[]`),
		swap(`"subnetIds":["subnet-0a1b2c3d"]`, `"subnetIds":"subnet-0a1b2c3d"`),
		swap(`"instanceSelection":"attribute-based"`, `"instanceSelection":"cheapest"`),
		swap(`"launchTemplateVersion":"$Default"`, `"launchTemplateVersion":""`),
		swap(`"fleet":{`, `"fleet":null,"x":{`),
		swap(`"owner":"octo"`, `"owner":"-octo"`),
		swap(`"repository":"app"`, `"repository":"octo/app"`),
		swap(`"github":{"owner":"octo","repository":"app"}`, `"github":{}`),
		swap(`"github":{"owner":"octo","repository":"app"}`, `"github":null`),
		swap(`"queueUrls":{`, `"queueUrls":{"xlarge":"","`),
	} {
		f.Add(doc, uint8(0))
	}
	f.Add(validPoolConfig, uint8(2)) // no value attribute
	f.Add(validPoolConfig, uint8(3)) // a number
	f.Add(validPoolConfig, uint8(4)) // a map
	const now = "2026-06-01T12:00:00Z"
	f.Fuzz(func(t *testing.T, doc string, shape uint8) {
		item := BaseItem(TypeMetadata, PoolConfigID, now)
		setAttr(item, AttrValue, fuzzAttr(shape, doc))
		c, err := PoolConfigFromItem(item)
		if err != nil {
			if !reflect.DeepEqual(c, PoolConfig{}) {
				t.Errorf("PoolConfigFromItem returned %+v with its error", c)
			}
			if !strings.HasPrefix(err.Error(), "pool config item is not valid: ") {
				t.Errorf("error %q does not name the pool config item", err)
			}
			return
		}
		if _, isS := item[AttrValue].(*types.AttributeValueMemberS); !isS {
			t.Fatalf("PoolConfigFromItem accepted a value attribute of type %T", item[AttrValue])
		}
		// What a claim relies on holds.
		if err := ValidatePoolName(c.Name); err != nil {
			t.Errorf("accepted config %q: %v", doc, err)
		}
		if err := ValidateResourceClasses(c.ResourceClasses); err != nil {
			t.Errorf("accepted config %q: %v", doc, err)
		}
		for class := range c.ResourceClasses {
			// Config items may be older than the rule against '-' in classes.
			if err := validateStoredClassName(c.Name, class); err != nil {
				t.Errorf("accepted config %q: %v", doc, err)
			}
		}
		if c.IdleTimeout < 0 || c.MaxRuntime < 0 {
			t.Errorf("accepted config %q with a negative duration: %+v", doc, c)
		}
		if fl := c.Fleet; fl != nil {
			if (fl.LaunchTemplateID == "") == (fl.LaunchTemplateName == "") || len(fl.SubnetIDs) == 0 ||
				(fl.InstanceSelection != SelectionAttributeBased && fl.InstanceSelection != SelectionExplicit) {
				t.Errorf("accepted config %q with an unusable fleet %+v", doc, *fl)
			}
		}
		if g := c.GitHub; g != nil && !GitHubOwnerPattern.MatchString(g.Owner) {
			t.Errorf("accepted config %q with GitHub owner %q", doc, g.Owner)
		}
		// The config re-renders to an item that reads back the same.
		again := c.Item(now)
		back, err := PoolConfigFromItem(again)
		if err != nil {
			t.Fatalf("config %+v read from %q does not read back from its own item: %v", c, doc, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip of %q:\n%+v\nthen\n%+v", doc, c, back)
		}
		if a, b := strIfS(again[AttrValue]), strIfS(back.Item(now)[AttrValue]); a != b {
			t.Fatalf("rendering is not stable: %s, then %s", a, b)
		}
	})
}

func FuzzRegistrationTokenFromItem(f *testing.F) {
	const (
		ts  = "2026-06-01T12:00:00Z"
		exp = "2026-06-01T13:00:00Z"
	)
	// shapes: one byte per field, in the order target, token, timestamp,
	// expires_at, remove_token, remove_expires_at; then the value's shape.
	all := []byte{0, 0, 0, 0, 0, 0, 0}
	f.Add("octo/app", "AABBCC", ts, exp, "RRMM", exp, all)
	f.Add("octo", "AABBCC", ts, exp, "", "", all)
	f.Add("", "AABBCC", ts, exp, "", "", []byte{2, 0, 0, 0, 2, 2, 0}) // a seeds-era item: token, timestamp, expires_at only
	f.Add("octo/app", "", ts, exp, "RRMM", exp, all)                  // no token
	f.Add("octo/app", "AABBCC", "", exp, "RRMM", exp, all)            // no timestamp
	f.Add("octo/app", "AABBCC", ts, "tomorrow", "RRMM", exp, all)
	f.Add("octo/app", "AABBCC", ts, exp, "RRMM", "", all)                        // remove token without expiry
	f.Add("octo/app", "AABBCC", ts, exp, "", "garbage", all)                     // stray expiry without remove token
	f.Add("octo/app", "AABBCC", "2026-06-01T12:00:00.5Z", exp, "RRMM", exp, all) // fractional seconds
	f.Add("octo/app", "AABBCC", ts, "2026-06-01T14:00:00+02:00", "RRMM", exp, all)
	f.Add("octo/app", "AABBCC", ts, exp, "RRMM", exp, []byte{0, 3, 0, 0, 0, 0, 0}) // token is a number
	f.Add("octo/app", "AABBCC", ts, exp, "RRMM", exp, []byte{0, 0, 3, 0, 0, 0, 0}) // timestamp is a number
	f.Add("octo/app", "AABBCC", ts, exp, "RRMM", exp, []byte{0, 0, 0, 0, 0, 0, 1}) // value is a string
	f.Add("octo/app", "AABBCC", ts, exp, "RRMM", exp, []byte{0, 0, 0, 0, 0, 0, 2}) // no value
	f.Add("octo/app", strings.Repeat("T", 5000), ts, exp, "RRMM", exp, all)
	f.Add("octo/app", "AABBCC", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "RRMM", "0001-01-01T00:00:00Z", all)
	f.Fuzz(func(t *testing.T, target, token, timestamp, expiresAt, remove, removeExpiresAt string, shapes []byte) {
		shape := func(i int) uint8 {
			if i < len(shapes) {
				return shapes[i]
			}
			return 0
		}
		fields := []struct{ name, value string }{
			{"target", target}, {"token", token}, {"timestamp", timestamp},
			{"expires_at", expiresAt}, {"remove_token", remove}, {"remove_expires_at", removeExpiresAt},
		}
		value := map[string]types.AttributeValue{}
		for i, fl := range fields {
			setAttr(value, fl.name, fuzzAttr(shape(i), fl.value))
		}
		item := BaseItem(TypeMetadata, RegistrationTokenID, "2026-06-01T12:00:00Z")
		switch shape(len(fields)) % 3 {
		case 0:
			item[AttrValue] = &types.AttributeValueMemberM{Value: value}
		case 1:
			item[AttrValue] = &types.AttributeValueMemberS{Value: token}
		}
		got, err := RegistrationTokenFromItem(item)

		// What the item holds, read independently.
		_, isMap := item[AttrValue].(*types.AttributeValueMemberM)
		in := map[string]string{}
		for name, v := range value {
			in[name] = strIfS(v)
		}
		okTime := func(s string) bool { _, ok := referenceTime(s); return ok }
		valid := isMap && in["token"] != "" && okTime(in["timestamp"]) && okTime(in["expires_at"]) &&
			(okTime(in["remove_expires_at"]) || (in["remove_token"] == "" && in["remove_expires_at"] == ""))
		if (err == nil) != valid {
			t.Fatalf("RegistrationTokenFromItem(%v) = %+v, %v; want valid = %v", in, got, err, valid)
		}
		if err != nil {
			if !reflect.DeepEqual(got, RegistrationToken{}) {
				t.Errorf("returned %+v with its error", got)
			}
			if !strings.HasPrefix(err.Error(), "registration token item") {
				t.Errorf("error %q does not name the registration token item", err)
			}
			return
		}
		if got.Target != in["target"] || got.Token != in["token"] || got.RemoveToken != in["remove_token"] ||
			FormatTime(got.FetchedAt) != in["timestamp"] || FormatTime(got.ExpiresAt) != in["expires_at"] ||
			(in["remove_expires_at"] != "" && FormatTime(got.RemoveExpiresAt) != in["remove_expires_at"]) {
			t.Fatalf("RegistrationTokenFromItem(%v) = %+v", in, got)
		}
		// Re-rendered, it reads back the same, with the same strings.
		again := got.Item()
		back, err := RegistrationTokenFromItem(again)
		if err != nil {
			t.Fatalf("token %+v does not read back from its own item: %v", got, err)
		}
		if back.Target != got.Target || back.Token != got.Token || back.RemoveToken != got.RemoveToken ||
			!back.FetchedAt.Equal(got.FetchedAt) || !back.ExpiresAt.Equal(got.ExpiresAt) || !back.RemoveExpiresAt.Equal(got.RemoveExpiresAt) {
			t.Fatalf("round trip: %+v, then %+v", got, back)
		}
		rendered := again[AttrValue].(*types.AttributeValueMemberM).Value
		for _, name := range []string{"target", "token", "timestamp", "expires_at", "remove_token"} {
			if s := strIfS(rendered[name]); s != in[name] {
				t.Errorf("re-rendered %s = %q, read %q", name, s, in[name])
			}
		}
		if in["remove_expires_at"] != "" && strIfS(rendered["remove_expires_at"]) != in["remove_expires_at"] {
			t.Errorf("re-rendered remove_expires_at = %q, read %q", strIfS(rendered["remove_expires_at"]), in["remove_expires_at"])
		}
		if strIfS(again[AttrUpdatedAt]) != in["timestamp"] {
			t.Errorf("re-rendered updatedAt = %q, want the timestamp %q", strIfS(again[AttrUpdatedAt]), in["timestamp"])
		}
	})
}

// instanceAttrs are the attributes an instance record's fuzz input sets, in order.
var instanceAttrs = []string{AttrPK, AttrSK, AttrState, AttrRunID, AttrThreshold, AttrResourceClass, AttrInstanceType, AttrUsageClass, AttrUpdatedAt}

func FuzzInstanceFromItem(f *testing.F) {
	const th, now = "2026-06-01T13:00:00Z", "2026-06-01T12:00:00Z"
	all := make([]byte, len(instanceAttrs))
	f.Add(TypeInstance, "ID#i-0abc", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add(TypeInstance, "ID#i-0abc", StateRunning, "run-42", th, "2xlarge", "m7g.2xlarge", UsageSpot, now, all)
	f.Add(TypeInstance, "ID#i-1", StateTerminated, "run-1", th, "", "", "", now, all)
	f.Add(TypeInstance, "ID#i-1", "exploded", "", "garbage", "huge", "x", "free", "yesterday", all) // nonsense the reader passes on
	f.Add(TypeInstance, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, []byte{0, 0, 2, 0, 0, 0, 0, 0, 0})
	f.Add(TypeInstance, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, []byte{0, 0, 3, 3, 3, 3, 3, 3, 3})
	f.Add(TypeInstance, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, []byte{0, 0, 0, 2, 0, 0, 0, 0, 0}) // runId absent
	f.Add(TypeInstance, "i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)                                  // SK without ID#
	f.Add(TypeInstance, "ID#", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add(TypeInstance, "ID#ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add(TypeHeartbeat, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add("type#instance", "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Add(TypeInstance, "ID#i-1", StateIdle, "", th, "large", "c6i.large", UsageOnDemand, now, []byte{2, 2, 2, 2, 2, 2, 2, 2, 2})
	f.Add(TypeInstance, "ID#"+strings.Repeat("i", 2048), StateIdle, strings.Repeat("r", 2048), th, "large", "c6i.large", UsageOnDemand, now, all)
	f.Fuzz(func(t *testing.T, pk, sk, state, runID, threshold, rc, it, uc, updatedAt string, shapes []byte) {
		values := []string{pk, sk, state, runID, threshold, rc, it, uc, updatedAt}
		item := map[string]types.AttributeValue{}
		in := map[string]string{}
		for i, name := range instanceAttrs {
			var shape uint8
			if i < len(shapes) {
				shape = shapes[i]
			}
			v := fuzzAttr(shape, values[i])
			setAttr(item, name, v)
			in[name] = strIfS(v)
		}
		inst, err := InstanceFromItem(item)
		id, hasPrefix := strings.CutPrefix(in[AttrSK], "ID#")
		valid := in[AttrPK] == TypeInstance && hasPrefix && id != "" && in[AttrState] != ""
		if (err == nil) != valid {
			t.Fatalf("InstanceFromItem(%v) = %+v, %v; want valid = %v", in, inst, err, valid)
		}
		if err != nil {
			if inst != (Instance{}) {
				t.Errorf("returned %+v with its error", inst)
			}
			if !strings.Contains(err.Error(), "not an instance record") {
				t.Errorf("error %q does not say it is not an instance record", err)
			}
			return
		}
		want := Instance{ID: id, State: in[AttrState], RunID: in[AttrRunID], Threshold: in[AttrThreshold], ResourceClass: in[AttrResourceClass],
			InstanceType: in[AttrInstanceType], UsageClass: in[AttrUsageClass], UpdatedAt: in[AttrUpdatedAt]}
		if inst != want {
			t.Fatalf("InstanceFromItem(%v) = %+v, want %+v", in, inst, want)
		}
		// Re-rendered, the record has the same key and attributes and reads back the same.
		again := inst.Item()
		for _, name := range instanceAttrs {
			if got := strIfS(again[name]); got != in[name] {
				t.Errorf("re-rendered %s = %q, read %q", name, got, in[name])
			}
		}
		if back, err := InstanceFromItem(again); err != nil || back != inst {
			t.Fatalf("round trip: %+v, then %+v, %v", inst, back, err)
		}
	})
}

func FuzzSignalFromItem(f *testing.F) {
	const now = "2026-06-01T12:00:00Z"
	// shapes: PK, SK, value.state, value.runId, updatedAt, then the value's shape.
	all := []byte{0, 0, 0, 0, 0, 0}
	for _, sig := range []string{SignalUserDataOK, SignalUserDataFailed, SignalRegistered, SignalRegistrationFailed,
		SignalDeregistered, SignalDeregistrationFailed, SignalReleased} {
		f.Add(TypeSignal, "ID#i-0abc", sig, "run-1", now, all)
	}
	f.Add(TypeSignal, "ID#i-0abc", "UD_SOMETHING_NEW", "run-1", now, all) // unknown signals pass through
	f.Add(TypeSignal, "ID#i-0abc", "", "run-1", now, all)
	f.Add(TypeSignal, "ID#i-0abc", SignalRegistered, "", "", all)
	f.Add(TypeSignal, "ID#i-0abc", SignalRegistered, "run-1", "garbage", all)
	f.Add(TypeSignal, "ID#i-0abc", SignalRegistered, "run-1", now, []byte{0, 0, 3, 0, 0, 0}) // state is a number
	f.Add(TypeSignal, "ID#i-0abc", SignalRegistered, "run-1", now, []byte{0, 0, 0, 2, 0, 0}) // no runId
	f.Add(TypeSignal, "ID#i-0abc", SignalRegistered, "run-1", now, []byte{0, 0, 0, 0, 0, 1}) // value is a string
	f.Add(TypeSignal, "ID#i-0abc", SignalRegistered, "run-1", now, []byte{0, 0, 0, 0, 0, 2}) // no value
	f.Add(TypeHeartbeat, "ID#i-0abc", SignalRegistered, "run-1", now, all)
	f.Add(TypeSignal, "i-0abc", SignalRegistered, "run-1", now, all)
	f.Add(TypeSignal, "ID#", SignalRegistered, "run-1", now, all)
	f.Add(TypeSignal, "ID#i-0abc", strings.Repeat("UD_", 2000), strings.Repeat("r", 2000), now, all)
	f.Fuzz(func(t *testing.T, pk, sk, state, runID, updatedAt string, shapes []byte) {
		shape := func(i int) uint8 {
			if i < len(shapes) {
				return shapes[i]
			}
			return 0
		}
		item := map[string]types.AttributeValue{}
		setAttr(item, AttrPK, fuzzAttr(shape(0), pk))
		setAttr(item, AttrSK, fuzzAttr(shape(1), sk))
		setAttr(item, AttrUpdatedAt, fuzzAttr(shape(4), updatedAt))
		value := map[string]types.AttributeValue{}
		setAttr(value, "state", fuzzAttr(shape(2), state))
		setAttr(value, "runId", fuzzAttr(shape(3), runID))
		switch shape(5) % 3 {
		case 0:
			item[AttrValue] = &types.AttributeValueMemberM{Value: value}
		case 1:
			item[AttrValue] = &types.AttributeValueMemberS{Value: state}
		}
		s, ok := SignalFromItem(item)
		_, isMap := item[AttrValue].(*types.AttributeValueMemberM)
		id, hasPrefix := strings.CutPrefix(strIfS(item[AttrSK]), "ID#")
		wantState, wantRun := strIfS(value["state"]), strIfS(value["runId"])
		valid := isMap && strIfS(item[AttrPK]) == TypeSignal && hasPrefix && id != "" && wantState != ""
		if ok != valid {
			t.Fatalf("SignalFromItem(%v) = %+v, %v; want ok = %v", item, s, ok, valid)
		}
		if !ok {
			return
		}
		want := Signal{InstanceID: id, State: wantState, RunID: wantRun, UpdatedAt: strIfS(item[AttrUpdatedAt])}
		if s != want {
			t.Fatalf("SignalFromItem = %+v, want %+v", s, want)
		}
		again := s.Item()
		for _, name := range []string{AttrPK, AttrSK, AttrUpdatedAt} {
			if strIfS(again[name]) != strIfS(item[name]) {
				t.Errorf("re-rendered %s = %q, read %q", name, strIfS(again[name]), strIfS(item[name]))
			}
		}
		if back, ok := SignalFromItem(again); !ok || back != s {
			t.Fatalf("round trip: %+v, then %+v, %v", s, back, ok)
		}
	})
}

// ---------------------------------------------------------------- names

// nameChars is PROTOCOL.md's character set of pool (and class) names.
func nameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// classChars: a class name has no '-', so the last '-' of a queue name
// separates pool and class.
func classChars(s string) bool { return nameChars(s) && !strings.Contains(s, "-") }

func FuzzValidatePoolName(f *testing.F) {
	for _, s := range []string{"", "a", "ci-runners", "my_pool-1", "-", "_", strings.Repeat("p", 40), strings.Repeat("p", 41),
		"my pool", "my.pool", "my/pool", "pool\n", "\npool", "pööl", "pool\x00", "POOL", "０", "p\u200bool", strings.Repeat("é", 20)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidatePoolName(name)
		valid := len(name) >= 1 && len(name) <= MaxPoolNameLength && nameChars(name)
		if (err == nil) != valid {
			t.Fatalf("ValidatePoolName(%q) = %v; the protocol says valid = %v", name, err, valid)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("ValidatePoolName(%q) = %q does not quote the name", name, err)
		}
		if valid && len(TableName(name)) > MaxPoolNameLength {
			t.Errorf("table name %q too long", TableName(name))
		}
	})
}

func FuzzValidateRunID(f *testing.F) {
	for _, s := range []string{"", "r", "run-1", "Run-1", "RUN", "12345-1", "build_1.2-x", "-run", ".run", "my run", "pool/run",
		"rün", "\u212a", "İ", strings.Repeat("r", 100), strings.Repeat("r", 101), "run\n", "run\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := ValidateRunID(id)
		valid := len(id) >= 1 && len(id) <= 100 && id[0] != '-' && id[0] != '.' && id[0] != '_'
		for i := 0; valid && i < len(id); i++ {
			c := id[i]
			valid = 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-'
		}
		if (err == nil) != valid {
			t.Fatalf("ValidateRunID(%q) = %v; the protocol says valid = %v", id, err, valid)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(id)) {
			t.Errorf("ValidateRunID(%q) = %q does not quote the run id", id, err)
		}
		// No two valid run ids are one label to GitHub.
		if valid && strings.ToLower(id) != id {
			t.Errorf("ValidateRunID accepted %q, which is not lower case", id)
		}
	})
}

func FuzzValidateClassName(f *testing.F) {
	for _, c := range []struct{ pool, class string }{
		{"ci", "large"}, {"ci", "2xlarge"}, {"ci", "gpu_big-1"}, {"ci", ""}, {"ci", "x large"}, {"ci", "x.large"}, {"ci", "größe"},
		{strings.Repeat("p", 40), strings.Repeat("c", 39)}, {strings.Repeat("p", 40), strings.Repeat("c", 40)},
		{strings.Repeat("p", 10), strings.Repeat("c", 69)}, {strings.Repeat("p", 10), strings.Repeat("c", 70)},
		{"", "large"}, {"ci", "large\n"}, {"ci", "-"},
	} {
		f.Add(c.pool, c.class)
	}
	f.Fuzz(func(t *testing.T, pool, class string) {
		err := ValidateClassName(pool, class)
		valid := class != "" && classChars(class) && len(pool)+1+len(class) <= MaxQueueNameLength
		if (err == nil) != valid {
			t.Fatalf("ValidateClassName(%q, %q) = %v; the protocol says valid = %v", pool, class, err, valid)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(class)) {
			t.Errorf("ValidateClassName(%q, %q) = %q does not quote the class", pool, class, err)
		}
		if valid && QueueName(pool, class) != pool+"-"+class {
			t.Errorf("QueueName(%q, %q) = %q", pool, class, QueueName(pool, class))
		}
		// A class valid now was valid in a config item before.
		if valid && validateStoredClassName(pool, class) != nil {
			t.Errorf("validateStoredClassName(%q, %q) = %v for a valid class", pool, class, validateStoredClassName(pool, class))
		}
		if q := QueueName(pool, class); valid && ValidatePoolName(pool) == nil {
			if i := strings.LastIndex(q, "-"); q[:i] != pool || q[i+1:] != class {
				t.Errorf("queue %q does not split at its last '-' into pool %q and class %q", q, pool, class)
			}
		}
	})
}
