package table_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// Partition reads one partition whole, in sort key order, page after page,
// consistently, and stops at fn's first error.
func TestPartition(t *testing.T) {
	db := newTable(
		instance("i-3", protocol.StateIdle, "", now).Item(), instance("i-1", protocol.StateIdle, "", now).Item(),
		instance("i-2", protocol.StateIdle, "", now).Item(), claimRecord("run-1", "n-1", protocol.FormatTime(now)),
		protocol.HeartbeatItem(protocol.InstanceARN("arn:aws:ec2:eu-west-1:123456789012:instance/", "i-1"), protocol.FormatTime(now)),
	)
	db.QueryPage = 2
	var ids []string
	read := func(it table.Item) error {
		ids = append(ids, protocol.StringAttr(it, protocol.AttrSK))
		return nil
	}
	if err := table.Partition(ctx, db, pool, protocol.TypeInstance, read); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ID#i-1", "ID#i-2", "ID#i-3"}; !slices.Equal(ids, want) {
		t.Errorf("read %q, want %q", ids, want)
	}
	if n := db.Count("Query"); n != 2 {
		t.Errorf("%d pages read, want 2 of at most 2 items", n)
	}
	for _, c := range db.Calls {
		if q, ok := c.In.(*dynamodb.QueryInput); ok && !aws.ToBool(q.ConsistentRead) {
			t.Error("a page was read without ConsistentRead")
		}
	}

	stop := errors.New("enough")
	ids = nil
	err := table.Partition(ctx, db, pool, protocol.TypeInstance, func(it table.Item) error {
		_ = read(it)
		return stop
	})
	if !errors.Is(err, stop) || len(ids) != 1 {
		t.Errorf("Partition = %v after %q, want fn's error after the first item", err, ids)
	}
	if err := table.Partition(ctx, db, "other", protocol.TypeInstance, read); err == nil {
		t.Error("Partition of a table that does not exist: nil error")
	}
}
