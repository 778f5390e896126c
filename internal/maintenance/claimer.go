package maintenance

import (
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
)

// The maintenance runs on a claim.Claimer: its clients, its log, its clock.

func log(c *claim.Claimer, msg string, keyvals ...any) {
	if c.Log != nil {
		c.Log(msg, keyvals...)
	}
}

// nowOf is the time on c's clock.
func nowOf(c *claim.Claimer) time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
