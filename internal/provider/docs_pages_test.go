package provider

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Registry's sidebar groups pages by their front matter's
// subcategory: the provider's resources, data sources, actions and list
// resources by what they act on, its guides by what a reader comes for.
var (
	objectSubcategories = []string{"Pool", "Claims", "Runners"}
	guideSubcategories  = []string{"Getting started", "Operations", "Sizing and performance", "Security", "Reference"}
)

var subcategoryLine = regexp.MustCompile(`(?m)^subcategory: "(.*)"$`)

// Every generated page but the index names a subcategory of its kind (the
// index takes none: the Registry refuses one there), so that the sidebar
// groups them.
func TestDocs_subcategories(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		allowed := objectSubcategories
		if filepath.Base(filepath.Dir(page)) == "guides" {
			allowed = guideSubcategories
		}
		m := subcategoryLine.FindSubmatch(frontMatter(text))
		switch {
		case m == nil || len(m[1]) == 0:
			t.Errorf("%s: no subcategory; give its template one of %q", page, allowed)
		case !slices.Contains(allowed, string(m[1])):
			t.Errorf("%s: subcategory %q, want one of %q (or add it to this test, for every page it groups)", page, m[1], allowed)
		}
	}
	index, err := os.ReadFile("../../docs/index.md")
	if err != nil {
		t.Fatal(err)
	}
	if subcategoryLine.Match(frontMatter(index)) {
		t.Error("docs/index.md: a subcategory, which the Registry refuses on the index")
	}
}

// A user's pages state what the provider does, not how it came to: no
// page tells a result against an earlier version of its own.
func TestDocs_noHistory(t *testing.T) {
	history := regexp.MustCompile(`(?i)previous version|\(was |no longer|which is gone`)
	err := filepath.WalkDir("../../docs", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(text), "\n") {
			if loc := history.FindStringIndex(line); loc != nil {
				t.Errorf("%s:%d: %q tells the page's history; state the result as it stands", path, i+1, line[loc[0]:loc[1]])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// markdownLink is a link's or image's target in a page: ](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every link of a page works on the Registry, which serves the docs pages
// alone, without their .md, and the index at .../docs (no trailing slash,
// so a relative link there resolves one level too high): the index links
// absolutely; the other pages link relatively only to another docs page
// (the Registry drops the .md), and to anything else (an example, an
// image) by its https:// address.
func TestDocs_linksWorkOnTheRegistry(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	pages = append(pages, "../../docs/index.md")
	relative := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markdownLink.FindAllStringSubmatch(string(text), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			relative++
			resolved := filepath.Clean(filepath.Join(filepath.Dir(page), filepath.FromSlash(target)))
			switch {
			case filepath.Base(page) == "index.md" && filepath.Dir(page) == filepath.Clean("../../docs"):
				t.Errorf("%s links %s: the Registry resolves a relative link of the index one level too high; link https://registry.terraform.io/providers/ec2runners/ec2runners/latest/docs/...", page, m[1])
			case !strings.HasSuffix(target, ".md") || !strings.HasPrefix(resolved, filepath.Clean("../../docs")+string(filepath.Separator)):
				t.Errorf("%s links %s, which the Registry does not serve: link a docs page, or the file's https:// address", page, m[1])
			default:
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s links %s: no such page", page, m[1])
				}
			}
		}
	}
	if relative == 0 {
		t.Error("no relative link found: the check reads nothing")
	}
}

// frontMatter is a page's front matter, between its first two "---" lines.
func frontMatter(text []byte) []byte {
	parts := strings.SplitN(string(text), "---\n", 3)
	if len(parts) < 3 {
		return nil
	}
	return []byte(parts[1])
}
