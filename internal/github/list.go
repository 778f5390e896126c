package github

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

const (
	// perPage is the most items GitHub's list endpoints return per page.
	perPage = 100
	// maxListPages bounds one list (2,000 items): a longer one is an
	// error, never a partial answer taken for the whole.
	maxListPages = 20
)

// listAll reads every page of a GitHub list whose answer holds
// total_count and the items under field, with bearer: all or an error.
func listAll[T any](ctx context.Context, c *Client, op operation, path, field, bearer string) ([]T, error) {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var all []T
	for page := 1; ; page++ {
		if page > maxListPages {
			return nil, fmt.Errorf("%s: more than %d items", op.what, perPage*maxListPages)
		}
		body, status, err := c.call(ctx, op, http.MethodGet, path+sep+"per_page="+strconv.Itoa(perPage)+"&page="+strconv.Itoa(page), bearer)
		c.forgetRevoked(bearer, err)
		if err != nil {
			return nil, err
		}
		var answer map[string]json.RawMessage
		var total int
		var items []T
		if json.Unmarshal(body, &answer) != nil || json.Unmarshal(answer["total_count"], &total) != nil || json.Unmarshal(answer[field], &items) != nil {
			return nil, fmt.Errorf("%s: HTTP %d response is not a list of %s", op.what, status, field)
		}
		all = append(all, items...)
		if len(items) == 0 || len(all) >= total {
			return all, nil
		}
	}
}
