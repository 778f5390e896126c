package claim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// warmSlot is one place of a class's hot target, held by a runner kept hot
// until its deadline.
type warmSlot struct {
	ID    string `json:"id"`
	Until string `json:"until"`
	Taken string `json:"taken"`
}

// slotSettling is how long a slot is held for a runner whose release took
// it but may not have made it idle yet (the idle write follows at once).
const slotSettling = time.Minute

// warmSlotsID names the lease item of a class's hot slots (TYPE#LEASE).
func warmSlotsID(class string) string { return "warm-" + class }

// keepTries bounds the optimistic rounds of keepHot under contention.
const keepTries = 5

// keepHot decides which of ids, runners of class about to go idle, the pool
// keeps hot, and until when. Slot i of the class's target is free when no
// runner holds it, or its holder is no longer idle with that slot's
// deadline (claimed since, or gone); each runner kept takes the lowest free
// slot below the target in force now, and stays idle until that slot ends
// (SlotEnd: slot i lives while the target exceeds i), never less than the
// pool's idle timeout. The slots are one item written on condition that it
// is unchanged since read, so two releases never keep more runners than
// the target. A slot taken less than slotSettling ago is held whatever its
// runner's record says: its release may not have made it idle yet. A
// failure keeps nothing: the runners go idle as usual.
func (c *Claimer) keepHot(ctx context.Context, s *store, cfg protocol.PoolConfig, class string, ids []string) map[string]time.Time {
	target, ok := cfg.Warm[class]
	if !ok || len(ids) == 0 {
		return nil
	}
	for range keepTries {
		now := c.now()
		hot := target.HotAt(now)
		if hot == 0 {
			return nil
		}
		kept, err := s.takeSlots(ctx, class, ids, hot, now, func(slot int) time.Time {
			return later(target.SlotEnd(slot, now), now.Add(time.Duration(cfg.IdleTimeout)))
		})
		if errors.Is(err, errConditionFailed) {
			continue // another release changed the slots meanwhile
		}
		if err != nil {
			c.log("release: keeping runners hot failed; they go idle as usual", "class", class, "error", err.Error())
			return nil
		}
		return kept
	}
	c.log("release: the hot slots kept changing; the runners go idle as usual", "class", class)
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// takeSlots gives ids the free slots below hot, in order, with the
// deadlines until gives, in one conditional write of the slots item, as of
// now.
func (s *store) takeSlots(ctx context.Context, class string, ids []string, hot int, now time.Time, until func(slot int) time.Time) (map[string]time.Time, error) {
	key := protocol.Key(protocol.TypeLease, warmSlotsID(class))
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("reading the hot slots of %s: %w", class, err)
	}
	prev := protocol.StringAttr(out.Item, protocol.AttrValue)
	slots := map[string]warmSlot{}
	if prev != "" {
		if err := json.Unmarshal([]byte(prev), &slots); err != nil {
			return nil, fmt.Errorf("the hot slots of %s are not valid: %w", class, err)
		}
	}
	var holders []string
	for _, sl := range slots {
		holders = append(holders, sl.ID)
	}
	records, err := s.instances(ctx, holders)
	if err != nil {
		return nil, err
	}
	kept := map[string]time.Time{}
	for i, next := 0, 0; i < hot && next < len(ids); i++ {
		key := strconv.Itoa(i)
		if sl, held := slots[key]; held && !protocol.IsPast(sl.Until, now) {
			r, ok := records[sl.ID]
			idle := ok && r.State == protocol.StateIdle && r.RunID == "" && r.Threshold == sl.Until
			if idle || !protocol.IsPast(sl.Taken, now.Add(-slotSettling)) {
				continue
			}
		}
		deadline := until(i)
		slots[key] = warmSlot{ID: ids[next], Until: protocol.FormatTime(deadline), Taken: protocol.FormatTime(now)}
		kept[ids[next]] = deadline
		next++
	}
	if len(kept) == 0 {
		return nil, nil
	}
	doc, _ := json.Marshal(slots) // plain data
	item := protocol.BaseItem(protocol.TypeLease, warmSlotsID(class), protocol.FormatTime(now))
	item[protocol.AttrValue] = str(string(doc))
	in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(PK)")}
	if prev != "" {
		in.ConditionExpression = aws.String("#value = :prev")
		in.ExpressionAttributeNames = map[string]string{"#value": protocol.AttrValue}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": str(prev)}
	}
	if _, err := s.db.PutItem(ctx, in); err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return nil, errConditionFailed
		}
		return nil, fmt.Errorf("writing the hot slots of %s: %w", class, err)
	}
	return kept, nil
}
