package pool

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// newPoolFixture is a pool not created yet: no table, no queues.
func newPoolFixture(t *testing.T, name string) *fixture {
	t.Helper()
	f := newFixture(t, name, nil)
	f.db.Absent = true
	clear(f.db.Items)
	return f
}

func createSpec(name string, classes ...string) Spec {
	spec := Spec{Name: name, ResourceClasses: map[string]protocol.ResourceClass{}, IdleTimeout: 7 * time.Minute, MaxRuntime: time.Hour,
		Tags: map[string]string{"team": "ci"}}
	for i, c := range classes {
		spec.ResourceClasses[c] = protocol.ResourceClass{CPU: 2 << i, MemoryMiB: 4096 << i}
	}
	return spec
}

// touched lists the mutating calls on the named queue.
func (f *fixture) touched(name string) []string {
	var out []string
	for _, c := range f.log.Mutating() {
		if strings.HasSuffix(c, "/"+name) || strings.HasSuffix(c, " "+name) {
			out = append(out, c)
		}
	}
	return out
}

// Every queue says whose it is: pool and class.
func TestCreateTagsQueuesWithTheirOwner(t *testing.T) {
	f := newPoolFixture(t, "ci-runners")
	if _, err := f.m.Create(context.Background(), createSpec("ci-runners", "large", "xlarge")); err != nil {
		t.Fatalf("Create = %v", err)
	}
	for _, class := range []string{"large", "xlarge"} {
		url := f.queue(class)
		if url == "" {
			t.Fatalf("no queue ci-runners-%s", class)
		}
		want := map[string]string{"team": "ci", protocol.TagPool: "ci-runners", protocol.TagClass: class}
		if got := f.sqs.Tags(url); !maps.Equal(got, want) {
			t.Errorf("queue %s tags = %v, want %v", url, got, want)
		}
	}
	if _, own := f.db.Tags[protocol.TagPool]; own {
		t.Errorf("table tags %v: the owner tags are the queues'", f.db.Tags)
	}
}

// A queue of the pool's name that another pool made (here: a pool created
// before '-' was refused in class names, pool a with class b-c) is not
// taken: the new pool would hand out the other pool's runners.
func TestCreateRefusesAnotherPoolsQueue(t *testing.T) {
	f := newPoolFixture(t, "a-b")
	foreign := f.sqs.AddQueue("a-b-c", map[string]string{protocol.TagPool: "a", protocol.TagClass: "b-c"})
	f.queueMessages(foreign, 3, f.sqs.Clock)
	_, err := f.m.Create(context.Background(), createSpec("a-b", "c"))
	if err == nil {
		t.Fatal("Create = nil, want an error about the other pool's queue")
	}
	for _, want := range []string{"SQS queue " + foreign + " already exists", `belongs to pool "a", resource class "b-c"`, "not to pool a-b, resource class c"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if got := f.touched("a-b-c"); len(got) > 0 {
		t.Errorf("the other pool's queue was changed: %q", got)
	}
	if f.sqs.URLOf("a-b-c") != foreign || len(f.sqs.VisibleIDs(foreign)) != 3 || f.sqs.Tags(foreign)[protocol.TagPool] != "a" {
		t.Errorf("the other pool's queue is not as it was: %q, tags %v, visible messages %q", f.sqs.URLOf("a-b-c"), f.sqs.Tags(foreign), f.sqs.VisibleIDs(foreign))
	}
	if !f.db.Absent {
		t.Error("the failed Create left its table behind")
	}
}

// A queue that is nobody's pool queue (no owner tags) is refused too.
func TestCreateRefusesAnUntaggedQueue(t *testing.T) {
	f := newPoolFixture(t, "cip")
	f.sqs.AddQueue("cip-large", map[string]string{"app": "billing"})
	_, err := f.m.Create(context.Background(), createSpec("cip", "large"))
	if err == nil {
		t.Fatal("Create = nil, want an error about the existing queue")
	}
	for _, want := range []string{"already exists and was not created by pool cip", "no ec2runners:pool or ec2runners:class tag",
		"tag it ec2runners:pool=cip and ec2runners:class=large"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if got := f.touched("cip-large"); len(got) > 0 {
		t.Errorf("the existing queue was changed: %q", got)
	}
}

// The pool's own queue, left by an earlier Create that failed half-way, is
// taken back and retagged.
func TestCreateTakesBackItsOwnQueue(t *testing.T) {
	f := newPoolFixture(t, "cip")
	left := f.sqs.AddQueue("cip-large", map[string]string{protocol.TagPool: "cip", protocol.TagClass: "large", "team": "old"})
	st, err := f.m.Create(context.Background(), createSpec("cip", "large"))
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	if st.QueueURLs["large"] != left {
		t.Errorf("queue URL %q, want the existing queue's %q", st.QueueURLs["large"], left)
	}
	if got, want := f.sqs.Tags(left), map[string]string{protocol.TagPool: "cip", protocol.TagClass: "large", "team": "ci"}; !maps.Equal(got, want) {
		t.Errorf("tags %v, want %v", got, want)
	}
}

// Another pool's queue created between the lookup and CreateQueue: AWS
// refuses CreateQueue (other tags), and the look that follows finds whose it is.
func TestCreateQueueRacingAnotherPool(t *testing.T) {
	defer func(d time.Duration) { queueRecreateBackoff = d }(queueRecreateBackoff)
	queueRecreateBackoff = time.Millisecond
	f := newPoolFixture(t, "a-b")
	f.sqs.BeforeCreateQueue = func(name string) {
		if name == "a-b-c" && f.sqs.URLOf(name) == "" {
			f.sqs.AddQueue(name, map[string]string{protocol.TagPool: "a", protocol.TagClass: "b-c"})
		}
	}
	_, err := f.m.Create(context.Background(), createSpec("a-b", "c"))
	if err == nil || !strings.Contains(err.Error(), `belongs to pool "a", resource class "b-c"`) {
		t.Fatalf("Create = %v, want an error naming the other pool", err)
	}
	if tags := f.sqs.Tags(f.sqs.URLOf("a-b-c")); tags[protocol.TagPool] != "a" || len(tags) != 2 {
		t.Errorf("the other pool's queue tags = %v", tags)
	}
}

// Queues of a pool created before the owner tags are the pool's (its
// config item records them): an update tags them.
func TestUpdateTagsRecordedQueues(t *testing.T) {
	f := newFixture(t, "cip", twoClasses)
	spec := Spec{Name: "cip", ResourceClasses: twoClasses, Tags: map[string]string{"team": "ci"}}
	if _, err := f.m.Update(context.Background(), spec); err != nil {
		t.Fatalf("Update = %v", err)
	}
	for class := range twoClasses {
		want := map[string]string{"team": "ci", protocol.TagPool: "cip", protocol.TagClass: class}
		if got := f.sqs.Tags(f.queue(class)); !maps.Equal(got, want) {
			t.Errorf("queue %s tags = %v, want %v", class, got, want)
		}
	}
}

// An update refuses a queue that says it is another pool's, and one it
// does not record that has no owner tags.
func TestUpdateRefusesQueuesNotItsOwn(t *testing.T) {
	t.Run("another pool's", func(t *testing.T) {
		f := newFixture(t, "cip", twoClasses)
		f.sqs.AddQueue("cip-large", map[string]string{protocol.TagPool: "other", protocol.TagClass: "large"})
		_, err := f.m.Update(context.Background(), Spec{Name: "cip", ResourceClasses: twoClasses})
		if err == nil || !strings.Contains(err.Error(), `belongs to pool "other", resource class "large"`) {
			t.Fatalf("Update = %v, want an error naming pool other", err)
		}
		if got := f.touched("cip-large"); len(got) > 0 {
			t.Errorf("the other pool's queue was changed: %q", got)
		}
	})
	t.Run("untagged, not recorded", func(t *testing.T) {
		f := newFixture(t, "cip", twoClasses)
		// The config item lost the large queue; one of that name exists.
		delete(f.cfg.QueueURLs, "large")
		f.db.Put(f.cfg.Item(testNow))
		_, err := f.m.Update(context.Background(), Spec{Name: "cip", ResourceClasses: twoClasses})
		if err == nil || !strings.Contains(err.Error(), "was not created by pool cip") {
			t.Fatalf("Update = %v, want an error about the untagged queue", err)
		}
		if got := f.touched("cip-large"); len(got) > 0 {
			t.Errorf("the untagged queue was changed: %q", got)
		}
	})
}

func TestQueueTags(t *testing.T) {
	user := map[string]string{"team": "ci", protocol.TagPool: "spoofed"}
	got := queueTags("cip", "large", user)
	want := map[string]string{"team": "ci", protocol.TagPool: "cip", protocol.TagClass: "large"}
	if !maps.Equal(got, want) {
		t.Errorf("queueTags = %v, want %v", got, want)
	}
	if user[protocol.TagPool] != "spoofed" {
		t.Error("queueTags changed its argument")
	}
	if got := queueTags("cip", "large", nil); len(got) != 2 {
		t.Errorf("queueTags(nil) = %v", got)
	}
}
