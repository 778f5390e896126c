package actions

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A small evaluator of GitHub Actions expressions, enough for the shipped
// workflows and actions: literals, contexts and property access, !, ==, !=,
// <, <=, >, >=, && and || (which yield an operand, as in JavaScript), and
// the functions always, success, failure, cancelled, contains, startsWith,
// endsWith, format and fromJSON. Values are nil, bool, float64, string,
// []any and map[string]any. Rules, from GitHub's "Evaluate expressions in workflows
// and actions": false, 0, -0, "", null and NaN are falsy; == compares
// strings ignoring case and coerces other mixed types to numbers.

type exprEnv struct {
	contexts map[string]any
	// status answers always(), success(), failure() and cancelled().
	status func(name string) bool
}

type exprParser struct {
	toks []string
	pos  int
	env  *exprEnv
}

var exprToken = regexp.MustCompile(`\s*(?:('(?:[^']|'')*')|([0-9]+(?:\.[0-9]+)?)|([A-Za-z_][A-Za-z0-9_-]*)|(==|!=|<=|>=|&&|\|\||[!<>().,\[\]*]))`)

func tokenize(s string) ([]string, error) {
	var toks []string
	rest := s
	for strings.TrimSpace(rest) != "" {
		m := exprToken.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return nil, fmt.Errorf("cannot read expression %q at %q", s, rest)
		}
		toks = append(toks, strings.TrimSpace(rest[:m[1]]))
		rest = rest[m[1]:]
	}
	return toks, nil
}

// evalExpr evaluates one expression (without ${{ }}).
func evalExpr(src string, env *exprEnv) (any, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	p := &exprParser{toks: toks, env: env}
	v, err := p.or()
	if err == nil && p.pos != len(p.toks) {
		err = fmt.Errorf("unexpected %q in %q", p.toks[p.pos], src)
	}
	return v, err
}

func (p *exprParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *exprParser) next() string { t := p.peek(); p.pos++; return t }

func (p *exprParser) expect(t string) error {
	if got := p.next(); got != t {
		return fmt.Errorf("want %q, got %q", t, got)
	}
	return nil
}

func (p *exprParser) or() (any, error) {
	l, err := p.and()
	for err == nil && p.peek() == "||" {
		p.next()
		var r any
		if r, err = p.and(); truthy(l) {
			continue
		}
		l = r
	}
	return l, err
}

func (p *exprParser) and() (any, error) {
	l, err := p.cmp()
	for err == nil && p.peek() == "&&" {
		p.next()
		var r any
		if r, err = p.cmp(); !truthy(l) {
			continue
		}
		l = r
	}
	return l, err
}

func (p *exprParser) cmp() (any, error) {
	l, err := p.unary()
	for err == nil {
		op := p.peek()
		switch op {
		case "==", "!=", "<", "<=", ">", ">=":
		default:
			return l, nil
		}
		p.next()
		var r any
		if r, err = p.unary(); err != nil {
			break
		}
		l = compare(op, l, r)
	}
	return l, err
}

func (p *exprParser) unary() (any, error) {
	if p.peek() == "!" {
		p.next()
		v, err := p.unary()
		return !truthy(v), err
	}
	return p.postfix()
}

func (p *exprParser) postfix() (any, error) {
	v, err := p.primary()
	for err == nil {
		switch p.peek() {
		case ".":
			p.next()
			v = property(v, p.next())
		case "[":
			p.next()
			var key any
			if key, err = p.or(); err == nil {
				err = p.expect("]")
				v = property(v, toString(key))
			}
		default:
			return v, nil
		}
	}
	return v, err
}

func (p *exprParser) primary() (any, error) {
	t := p.next()
	switch {
	case t == "(":
		v, err := p.or()
		if err == nil {
			err = p.expect(")")
		}
		return v, err
	case strings.HasPrefix(t, "'"):
		return strings.ReplaceAll(t[1:len(t)-1], "''", "'"), nil
	case t == "true" || t == "false":
		return t == "true", nil
	case t == "null":
		return nil, nil
	case t != "" && t[0] >= '0' && t[0] <= '9':
		return strconv.ParseFloat(t, 64)
	case p.peek() == "(":
		p.next()
		var args []any
		for p.peek() != ")" {
			a, err := p.or()
			if err != nil {
				return nil, err
			}
			args = append(args, a)
			if p.peek() == "," {
				p.next()
			}
		}
		p.next()
		return p.call(t, args)
	case t != "":
		if v, ok := p.env.contexts[t]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("unknown context %q", t)
	}
	return nil, fmt.Errorf("unexpected end of expression")
}

func (p *exprParser) call(name string, args []any) (any, error) {
	switch strings.ToLower(name) {
	case "always", "success", "failure", "cancelled":
		return p.env.status(strings.ToLower(name)), nil
	case "contains":
		return strings.Contains(strings.ToLower(toString(args[0])), strings.ToLower(toString(args[1]))), nil
	case "startswith":
		return strings.HasPrefix(strings.ToLower(toString(args[0])), strings.ToLower(toString(args[1]))), nil
	case "endswith":
		return strings.HasSuffix(strings.ToLower(toString(args[0])), strings.ToLower(toString(args[1]))), nil
	case "fromjson":
		var v any
		if err := json.Unmarshal([]byte(toString(args[0])), &v); err != nil {
			return nil, fmt.Errorf("fromJSON: %v", err)
		}
		return v, nil
	case "format":
		s := toString(args[0])
		for i, a := range args[1:] {
			s = strings.ReplaceAll(s, "{"+strconv.Itoa(i)+"}", toString(a))
		}
		return s, nil
	}
	return nil, fmt.Errorf("function %s is not modelled", name)
}

func property(v any, name string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, p := range x { // property names are case-insensitive
			if strings.EqualFold(k, name) {
				return p
			}
		}
	case []any:
		if i, err := strconv.Atoi(name); err == nil && i >= 0 && i < len(x) {
			return x[i]
		}
	}
	return nil
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	}
	return true
}

func toNumber(v any) float64 {
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 1
		}
		return 0
	case float64:
		return x
	case string:
		if strings.TrimSpace(x) == "" {
			return 0
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return math.NaN()
		}
		return f
	}
	return math.NaN()
}

func toString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return "Object"
}

func compare(op string, l, r any) bool {
	ls, lok := l.(string)
	rs, rok := r.(string)
	var c int
	if lok && rok {
		c = strings.Compare(strings.ToLower(ls), strings.ToLower(rs))
	} else {
		a, b := toNumber(l), toNumber(r)
		if math.IsNaN(a) || math.IsNaN(b) {
			return op == "!="
		}
		switch {
		case a < b:
			c = -1
		case a > b:
			c = 1
		}
	}
	switch op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

var templateExpr = regexp.MustCompile(`\$\{\{(.*?)\}\}`)

// evalTemplate evaluates a workflow value: text with ${{ }} expressions in
// it (the whole value, when it is one expression).
func evalTemplate(s string, env *exprEnv) (any, error) {
	if m := templateExpr.FindStringSubmatchIndex(s); m != nil && m[0] == 0 && m[1] == len(s) {
		return evalExpr(s[m[2]:m[3]], env)
	}
	var err error
	out := templateExpr.ReplaceAllStringFunc(s, func(e string) string {
		v, e2 := evalExpr(templateExpr.FindStringSubmatch(e)[1], env)
		if e2 != nil {
			err = e2
		}
		return toString(v)
	})
	return out, err
}

// evalIf evaluates an if: condition, which may omit ${{ }}; without a
// status function it is success() && (condition), as GitHub evaluates it.
func evalIf(cond string, env *exprEnv) (bool, error) {
	cond = strings.TrimSpace(cond)
	if cond == "" {
		cond = "success()"
	}
	if m := templateExpr.FindStringSubmatch(cond); m != nil && strings.HasPrefix(cond, "${{") && strings.HasSuffix(cond, "}}") {
		cond = m[1]
	}
	if !regexp.MustCompile(`\b(always|success|failure|cancelled)\s*\(`).MatchString(cond) {
		cond = "success() && (" + cond + ")"
	}
	v, err := evalExpr(cond, env)
	return truthy(v), err
}

func TestExpressions(t *testing.T) {
	env := &exprEnv{
		contexts: map[string]any{
			"github": map[string]any{"run_attempt": "2"},
			"needs":  map[string]any{"claim": map[string]any{"outputs": map[string]any{"attempt": "1", "runs-on": "42-1"}, "result": "success"}},
		},
		status: func(name string) bool { return name == "always" || name == "success" },
	}
	for src, want := range map[string]any{
		"needs.claim.outputs.attempt == github.run_attempt && needs.claim.outputs.runs-on || 'ubuntu-latest'": "ubuntu-latest",
		"needs.claim.outputs.attempt != github.run_attempt":                                                   true,
		"needs.claim.outputs['runs-on']":                                                                      "42-1",
		"needs.CLAIM.Result == 'SUCCESS'":                                                                     true,
		"'1' == 1 && !(2 < 1)":                                                                                true,
		"needs.nothing.outputs.x || 'fallback'":                                                               "fallback",
		"format('{0}-{1}', github.run_attempt, 'x')":                                                          "2-x",
		"always() && ''": "",
		"fromJSON('[{\"name\": \"build\"}]')[0].name": "build",
	} {
		got, err := evalExpr(src, env)
		if err != nil || got != want {
			t.Errorf("%s = %#v (%v), want %#v", src, got, err, want)
		}
	}
	if ok, _ := evalIf("needs.claim.result == 'success'", env); !ok {
		t.Error("if: needs.claim.result == 'success' is false")
	}
	env.status = func(name string) bool { return name == "always" }
	if ok, _ := evalIf("needs.claim.result == 'success'", env); ok {
		t.Error("if: without a status function is not success() && (...)")
	}
	if ok, _ := evalIf("${{ always() }}", env); !ok {
		t.Error("if: ${{ always() }} is false")
	}
	if got, _ := evalTemplate("run ${{ github.run_attempt }} of ${{ needs.claim.outputs.attempt }}", env); got != "run 2 of 1" {
		t.Errorf("template: %q", got)
	}
}
