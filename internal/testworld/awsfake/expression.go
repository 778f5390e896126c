package awsfake

// DynamoDB's expression language, evaluated as the service does, for
// whatever expressions the code under test sends:
//
//	condition  = or
//	or         = and { "OR" and }
//	and        = not { "AND" not }
//	not        = "NOT" not | primary
//	primary    = "(" condition ")"
//	           | "attribute_exists" "(" path ")" | "attribute_not_exists" "(" path ")"
//	           | "attribute_type" "(" path "," operand ")"
//	           | "begins_with" "(" path "," operand ")" | "contains" "(" path "," operand ")"
//	           | operand comparator operand        (= <> < <= > >=)
//	           | operand "BETWEEN" operand "AND" operand
//	           | operand "IN" "(" operand { "," operand } ")"
//	operand    = path | ":value" | "size" "(" path ")"
//	path       = name { "." name | "[" digits "]" }, name = "#name" | identifier
//
//	update     = clause { clause }, each of SET, REMOVE, ADD and DELETE at most once
//	SET        = path "=" value { "," path "=" value }
//	value      = term [ ("+" | "-") term ]
//	term       = operand | "if_not_exists" "(" path "," value ")" | "list_append" "(" value "," value ")"
//	REMOVE     = path { "," path }
//	ADD        = path ":value" { "," path ":value" }   (a number, or a set)
//	DELETE     = path ":value" { "," path ":value" }   (a set)
//
//	projection = path { "," path }
//
// Keywords and function names are case-insensitive, as DynamoDB's are. A
// bare attribute name may not be one of DynamoDB's reserved words
// (reserved_words.txt, from
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ReservedWords.html,
// "This list isn't case-sensitive"): DynamoDB refuses it with a
// ValidationException, "Invalid UpdateExpression: Attribute name is a
// reserved keyword; reserved keyword: status".

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

//go:embed reserved_words.txt
var reservedWordList string

// reservedWords are DynamoDB's reserved words, upper case.
var reservedWords = func() map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(reservedWordList) {
		out[w] = true
	}
	return out
}()

// reservedWord is a reserved word an expression uses as an attribute name.
type reservedWord string

func (w reservedWord) Error() string {
	return "Attribute name is a reserved keyword; reserved keyword: " + string(w)
}

// invalid is DynamoDB's refusal of the expression expr of kind
// (UpdateExpression, ConditionExpression, ...) for err.
func invalid(kind, expr string, err error) error {
	var w reservedWord
	if errors.As(err, &w) {
		return &smithy.GenericAPIError{Code: "ValidationException", Message: "Invalid " + kind + ": " + w.Error(), Fault: smithy.FaultClient}
	}
	return fmt.Errorf("fake dynamodb: ValidationException: invalid %s %q: %w", kind, expr, err)
}

// token is one lexical token of an expression.
type token struct {
	kind string // "name" (identifier or #name), "value" (:value), "number", or the punctuation itself
	text string
}

func tokenize(expr string) ([]token, error) {
	var out []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(expr[i:], "<>") || strings.HasPrefix(expr[i:], "<=") || strings.HasPrefix(expr[i:], ">="):
			out = append(out, token{expr[i : i+2], expr[i : i+2]})
			i += 2
		case strings.ContainsRune("()[],.=<>+-", rune(c)):
			out = append(out, token{string(c), string(c)})
			i++
		case c == '#' || c == ':' || c == '_' || unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c)):
			j := i + 1
			for j < len(expr) && (expr[j] == '_' || unicode.IsLetter(rune(expr[j])) || unicode.IsDigit(rune(expr[j]))) {
				j++
			}
			kind := "name"
			switch {
			case c == ':':
				kind = "value"
			case unicode.IsDigit(rune(c)):
				kind = "number"
			}
			if j == i+1 && (c == '#' || c == ':') {
				return nil, fmt.Errorf("syntax error: %q alone at %d", c, i)
			}
			out = append(out, token{kind, expr[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("syntax error: unexpected %q at %d", c, i)
		}
	}
	return out, nil
}

// parser reads one expression's tokens, resolving its names and values
// in env.
type parser struct {
	env  *exprEnv
	toks []token
	pos  int
}

func newParser(env *exprEnv, expr string) (*parser, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	return &parser{env: env, toks: toks}, nil
}

func (p *parser) peek() token {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return token{kind: "end"}
}

// keyword says whether the next token is the keyword kw, and takes it if so.
func (p *parser) keyword(kw string) bool {
	if t := p.peek(); t.kind == "name" && strings.EqualFold(t.text, kw) {
		p.pos++
		return true
	}
	return false
}

// punct says whether the next token is s, and takes it if so.
func (p *parser) punct(s string) bool {
	if p.peek().kind == s {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expect(s string) error {
	if !p.punct(s) {
		return fmt.Errorf("syntax error: want %q, found %q", s, p.peek().text)
	}
	return nil
}

func (p *parser) end() error {
	if p.pos != len(p.toks) {
		return fmt.Errorf("syntax error: unexpected %q", p.peek().text)
	}
	return nil
}

// pathStep is one step of a document path: an attribute or map key, or a
// list index.
type pathStep struct {
	name  string
	index int // when name is ""
}

type docPath []pathStep

func (d docPath) String() string {
	var b strings.Builder
	for i, s := range d {
		switch {
		case s.name == "":
			fmt.Fprintf(&b, "[%d]", s.index)
		case i > 0:
			b.WriteString("." + s.name)
		default:
			b.WriteString(s.name)
		}
	}
	return b.String()
}

func (p *parser) path() (docPath, error) {
	first, err := p.pathName()
	if err != nil {
		return nil, err
	}
	path := docPath{{name: first}}
	for {
		switch {
		case p.punct("."):
			n, err := p.pathName()
			if err != nil {
				return nil, err
			}
			path = append(path, pathStep{name: n})
		case p.punct("["):
			t := p.peek()
			i, err := strconv.Atoi(t.text)
			if t.kind != "number" || err != nil {
				return nil, fmt.Errorf("syntax error: list index %q", t.text)
			}
			p.pos++
			if err := p.expect("]"); err != nil {
				return nil, err
			}
			path = append(path, pathStep{index: i})
		default:
			return path, nil
		}
	}
}

func (p *parser) pathName() (string, error) {
	t := p.peek()
	if t.kind != "name" {
		return "", fmt.Errorf("syntax error: want an attribute name, found %q", t.text)
	}
	if reservedWords[strings.ToUpper(t.text)] {
		return "", reservedWord(t.text)
	}
	p.pos++
	return p.env.name(t.text)
}

// resolve is the value at path in it, nil when there is none.
func resolve(it item, path docPath) types.AttributeValue {
	var cur types.AttributeValue = &types.AttributeValueMemberM{Value: it}
	for _, s := range path {
		switch v := cur.(type) {
		case *types.AttributeValueMemberM:
			if s.name == "" {
				return nil
			}
			cur = v.Value[s.name]
		case *types.AttributeValueMemberL:
			if s.name != "" || s.index >= len(v.Value) {
				return nil
			}
			cur = v.Value[s.index]
		default:
			return nil
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}

// operand is a value an expression reads: a path's, a literal's or a
// function's, evaluated against an item.
type operand func(it item) (types.AttributeValue, error)

func (p *parser) operand() (operand, error) {
	t := p.peek()
	switch {
	case t.kind == "value":
		p.pos++
		v, err := p.env.value(t.text)
		return func(item) (types.AttributeValue, error) { return v, err }, err
	case t.kind == "name" && strings.EqualFold(t.text, "size") && p.pos+1 < len(p.toks) && p.toks[p.pos+1].kind == "(":
		p.pos += 2
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return func(it item) (types.AttributeValue, error) {
			n, ok := size(resolve(it, path))
			if !ok {
				return nil, nil
			}
			return &types.AttributeValueMemberN{Value: strconv.Itoa(n)}, nil
		}, nil
	}
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	return func(it item) (types.AttributeValue, error) { return resolve(it, path), nil }, nil
}

// size is DynamoDB's size(): a string's length in bytes, a binary's, or a
// set's, list's or map's number of elements.
func size(v types.AttributeValue) (int, bool) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value), true
	case *types.AttributeValueMemberB:
		return len(v.Value), true
	case *types.AttributeValueMemberSS:
		return len(v.Value), true
	case *types.AttributeValueMemberNS:
		return len(v.Value), true
	case *types.AttributeValueMemberBS:
		return len(v.Value), true
	case *types.AttributeValueMemberL:
		return len(v.Value), true
	case *types.AttributeValueMemberM:
		return len(v.Value), true
	}
	return 0, false
}

// condition is a parsed condition, evaluated against an item (nil: none).
type condition func(it item) (bool, error)

// parseCondition parses a condition (or key condition, or filter)
// expression.
func parseCondition(env *exprEnv, expr string) (condition, error) {
	p, err := newParser(env, expr)
	if err != nil {
		return nil, err
	}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	return c, p.end()
}

func (p *parser) or() (condition, error) {
	return p.chain("OR", p.and, func(a, b bool) bool { return a || b })
}

func (p *parser) and() (condition, error) {
	return p.chain("AND", p.not, func(a, b bool) bool { return a && b })
}

// chain parses next { kw next }, combining the results with op.
func (p *parser) chain(kw string, next func() (condition, error), op func(a, b bool) bool) (condition, error) {
	parts := []condition{}
	for {
		c, err := next()
		if err != nil {
			return nil, err
		}
		parts = append(parts, c)
		if !p.keyword(kw) {
			break
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return func(it item) (bool, error) {
		result, err := parts[0](it)
		for _, c := range parts[1:] {
			if err != nil {
				return false, err
			}
			var ok bool
			ok, err = c(it)
			result = op(result, ok)
		}
		return result, err
	}, nil
}

func (p *parser) not() (condition, error) {
	if p.keyword("NOT") {
		c, err := p.not()
		if err != nil {
			return nil, err
		}
		return func(it item) (bool, error) {
			ok, err := c(it)
			return !ok, err
		}, nil
	}
	return p.primary()
}

// pathFunctions are the condition functions whose first argument is a
// path.
var pathFunctions = map[string]func(have, arg types.AttributeValue) bool{
	"attribute_exists":     func(have, _ types.AttributeValue) bool { return have != nil },
	"attribute_not_exists": func(have, _ types.AttributeValue) bool { return have == nil },
	"attribute_type":       func(have, arg types.AttributeValue) bool { return have != nil && typeName(have) == stringOf(arg) },
	"begins_with":          beginsWith,
	"contains":             contains,
}

func (p *parser) primary() (condition, error) {
	if p.punct("(") {
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		return c, p.expect(")")
	}
	if t := p.peek(); t.kind == "name" && p.pos+1 < len(p.toks) && p.toks[p.pos+1].kind == "(" && !strings.EqualFold(t.text, "size") {
		fn, ok := pathFunctions[strings.ToLower(t.text)]
		if !ok {
			return nil, fmt.Errorf("invalid function name; function: %s", t.text)
		}
		return p.function(strings.ToLower(t.text), fn)
	}
	left, err := p.operand()
	if err != nil {
		return nil, err
	}
	switch {
	case p.keyword("BETWEEN"):
		low, err := p.operand()
		if err != nil {
			return nil, err
		}
		if !p.keyword("AND") {
			return nil, errors.New("syntax error: BETWEEN without AND")
		}
		high, err := p.operand()
		if err != nil {
			return nil, err
		}
		return func(it item) (bool, error) {
			v, lo, hi, err := eval3(it, left, low, high)
			if err != nil {
				return false, err
			}
			a, okA := order(v, lo)
			b, okB := order(v, hi)
			return okA && okB && a >= 0 && b <= 0, nil
		}, nil
	case p.keyword("IN"):
		if err := p.expect("("); err != nil {
			return nil, err
		}
		var list []operand
		for {
			o, err := p.operand()
			if err != nil {
				return nil, err
			}
			list = append(list, o)
			if !p.punct(",") {
				break
			}
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return func(it item) (bool, error) {
			v, err := left(it)
			for _, o := range list {
				if err != nil {
					return false, err
				}
				var w types.AttributeValue
				w, err = o(it)
				if equal(v, w) {
					return err == nil, err
				}
			}
			return false, err
		}, nil
	}
	cmp := p.peek().kind
	test, ok := comparators[cmp]
	if !ok {
		return nil, fmt.Errorf("syntax error: want a comparator, found %q", p.peek().text)
	}
	p.pos++
	right, err := p.operand()
	if err != nil {
		return nil, err
	}
	return func(it item) (bool, error) {
		a, err := left(it)
		if err != nil {
			return false, err
		}
		b, err := right(it)
		if err != nil {
			return false, err
		}
		return test(a, b), nil
	}, nil
}

// function parses the arguments of a condition function: a path, then an
// operand for those that take two.
func (p *parser) function(name string, fn func(have, arg types.AttributeValue) bool) (condition, error) {
	p.pos += 2 // the name and "("
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	arg := func(item) (types.AttributeValue, error) { return nil, nil }
	if name != "attribute_exists" && name != "attribute_not_exists" {
		if err := p.expect(","); err != nil {
			return nil, err
		}
		if arg, err = p.operand(); err != nil {
			return nil, err
		}
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	return func(it item) (bool, error) {
		a, err := arg(it)
		return fn(resolve(it, path), a), err
	}, nil
}

func eval3(it item, a, b, c operand) (x, y, z types.AttributeValue, err error) {
	if x, err = a(it); err != nil {
		return
	}
	if y, err = b(it); err != nil {
		return
	}
	z, err = c(it)
	return
}

// comparators: = and <> compare any two values; the others order two
// strings, numbers or binaries of the same type, and are false otherwise
// (a missing attribute among them).
var comparators = map[string]func(a, b types.AttributeValue) bool{
	"=":  equal,
	"<>": func(a, b types.AttributeValue) bool { return !equal(a, b) },
	"<":  ordered(func(c int) bool { return c < 0 }),
	"<=": ordered(func(c int) bool { return c <= 0 }),
	">":  ordered(func(c int) bool { return c > 0 }),
	">=": ordered(func(c int) bool { return c >= 0 }),
}

func ordered(test func(int) bool) func(a, b types.AttributeValue) bool {
	return func(a, b types.AttributeValue) bool {
		c, ok := order(a, b)
		return ok && test(c)
	}
}

// order compares two strings, numbers or binaries of the same type.
func order(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		if b, ok := b.(*types.AttributeValueMemberS); ok {
			return strings.Compare(a.Value, b.Value), true
		}
	case *types.AttributeValueMemberN:
		if b, ok := b.(*types.AttributeValueMemberN); ok {
			x, okA := number(a.Value)
			y, okB := number(b.Value)
			return x.Cmp(y), okA && okB
		}
	case *types.AttributeValueMemberB:
		if b, ok := b.(*types.AttributeValueMemberB); ok {
			return bytes.Compare(a.Value, b.Value), true
		}
	}
	return 0, false
}

func number(s string) (*big.Rat, bool) {
	return new(big.Rat).SetString(s)
}

// equal is DynamoDB's equality: the same type and value, sets in any
// order; a missing value equals nothing.
func equal(a, b types.AttributeValue) bool {
	if a == nil || b == nil {
		return false
	}
	if c, ok := order(a, b); ok {
		return c == 0
	}
	switch a := a.(type) {
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool { return x == y })
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value, sameNumber)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(a.Value, b.Value, bytes.Equal)
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, equal)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for k, v := range a.Value {
			if !equal(v, b.Value[k]) {
				return false
			}
		}
		return true
	}
	return false
}

func sameNumber(x, y string) bool {
	a, okA := number(x)
	b, okB := number(y)
	return okA && okB && a.Cmp(b) == 0
}

func sameSet[T any](a, b []T, eq func(x, y T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y T) bool { return eq(x, y) }) {
			return false
		}
	}
	return true
}

func beginsWith(have, prefix types.AttributeValue) bool {
	switch h := have.(type) {
	case *types.AttributeValueMemberS:
		p, ok := prefix.(*types.AttributeValueMemberS)
		return ok && strings.HasPrefix(h.Value, p.Value)
	case *types.AttributeValueMemberB:
		p, ok := prefix.(*types.AttributeValueMemberB)
		return ok && bytes.HasPrefix(h.Value, p.Value)
	}
	return false
}

// contains: a substring of a string, an element of a set, or of a list.
func contains(have, want types.AttributeValue) bool {
	switch h := have.(type) {
	case *types.AttributeValueMemberS:
		w, ok := want.(*types.AttributeValueMemberS)
		return ok && strings.Contains(h.Value, w.Value)
	case *types.AttributeValueMemberB:
		w, ok := want.(*types.AttributeValueMemberB)
		return ok && bytes.Contains(h.Value, w.Value)
	case *types.AttributeValueMemberSS:
		w, ok := want.(*types.AttributeValueMemberS)
		return ok && slices.Contains(h.Value, w.Value)
	case *types.AttributeValueMemberNS:
		w, ok := want.(*types.AttributeValueMemberN)
		return ok && slices.ContainsFunc(h.Value, func(n string) bool { return sameNumber(n, w.Value) })
	case *types.AttributeValueMemberBS:
		w, ok := want.(*types.AttributeValueMemberB)
		return ok && slices.ContainsFunc(h.Value, func(b []byte) bool { return bytes.Equal(b, w.Value) })
	case *types.AttributeValueMemberL:
		return slices.ContainsFunc(h.Value, func(e types.AttributeValue) bool { return equal(e, want) })
	}
	return false
}

// typeName is a value's type as attribute_type names it.
func typeName(v types.AttributeValue) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", v), "*types.AttributeValueMember")
}

func stringOf(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// action is one action of an update expression, applied to an item in
// place; it reads the item as it was before the update (old).
type action func(old, cur item) error

// parseUpdate parses an update expression.
func parseUpdate(env *exprEnv, expr string) ([]action, error) {
	p, err := newParser(env, expr)
	if err != nil {
		return nil, err
	}
	var actions []action
	seen := map[string]bool{}
	for p.pos < len(p.toks) {
		t := p.peek()
		clause := strings.ToUpper(t.text)
		parse, ok := map[string]func() (action, error){"SET": p.setAction, "REMOVE": p.removeAction, "ADD": p.addAction, "DELETE": p.deleteAction}[clause]
		if t.kind != "name" || !ok {
			return nil, fmt.Errorf("syntax error: want SET, REMOVE, ADD or DELETE, found %q", t.text)
		}
		if seen[clause] {
			return nil, fmt.Errorf("the %s section can only be used once in an update expression", clause)
		}
		seen[clause] = true
		p.pos++
		for {
			a, err := parse()
			if err != nil {
				return nil, err
			}
			actions = append(actions, a)
			if !p.punct(",") {
				break
			}
		}
	}
	if len(actions) == 0 {
		return nil, errors.New("syntax error: an empty update expression")
	}
	return actions, nil
}

// target parses the path an action writes: never a key attribute.
func (p *parser) target() (docPath, error) {
	path, err := p.path()
	if err == nil && (path[0].name == "PK" || path[0].name == "SK") {
		err = fmt.Errorf("cannot update attribute %s: this attribute is part of the key", path[0].name)
	}
	return path, err
}

func (p *parser) setAction() (action, error) {
	path, err := p.target()
	if err != nil {
		return nil, err
	}
	if err := p.expect("="); err != nil {
		return nil, err
	}
	value, err := p.value()
	if err != nil {
		return nil, err
	}
	return func(old, cur item) error {
		v, err := value(old)
		if err != nil {
			return err
		}
		if v == nil {
			return fmt.Errorf("the provided expression refers to an attribute that does not exist in the item (SET %s)", path)
		}
		return assign(cur, path, v)
	}, nil
}

// value parses the right-hand side of a SET action.
func (p *parser) value() (operand, error) {
	left, err := p.term()
	if err != nil {
		return nil, err
	}
	sign := p.peek().kind
	if sign != "+" && sign != "-" {
		return left, nil
	}
	p.pos++
	right, err := p.term()
	if err != nil {
		return nil, err
	}
	return func(it item) (types.AttributeValue, error) {
		a, err := left(it)
		if err != nil {
			return nil, err
		}
		b, err := right(it)
		if err != nil {
			return nil, err
		}
		x, okA := numberValue(a)
		y, okB := numberValue(b)
		if !okA || !okB {
			return nil, errors.New("an operand in the update expression has an incorrect data type")
		}
		if sign == "-" {
			y.Neg(y)
		}
		return formatNumber(x.Add(x, y)), nil
	}, nil
}

func numberValue(v types.AttributeValue) (*big.Rat, bool) {
	if n, ok := v.(*types.AttributeValueMemberN); ok {
		return number(n.Value)
	}
	return nil, false
}

func formatNumber(r *big.Rat) types.AttributeValue {
	if r.IsInt() {
		return &types.AttributeValueMemberN{Value: r.Num().String()}
	}
	f, _ := r.Float64()
	return &types.AttributeValueMemberN{Value: strconv.FormatFloat(f, 'f', -1, 64)}
}

func (p *parser) term() (operand, error) {
	t := p.peek()
	if t.kind != "name" || p.pos+1 >= len(p.toks) || p.toks[p.pos+1].kind != "(" {
		return p.operand()
	}
	switch strings.ToLower(t.text) {
	case "if_not_exists":
		p.pos += 2
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		fallback, err := p.value()
		if err != nil {
			return nil, err
		}
		return func(it item) (types.AttributeValue, error) {
			if v := resolve(it, path); v != nil {
				return v, nil
			}
			return fallback(it)
		}, p.expect(")")
	case "list_append":
		p.pos += 2
		first, err := p.value()
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		second, err := p.value()
		if err != nil {
			return nil, err
		}
		return func(it item) (types.AttributeValue, error) {
			a, err := first(it)
			if err != nil {
				return nil, err
			}
			b, err := second(it)
			if err != nil {
				return nil, err
			}
			la, okA := a.(*types.AttributeValueMemberL)
			lb, okB := b.(*types.AttributeValueMemberL)
			if !okA || !okB {
				return nil, errors.New("list_append needs two lists")
			}
			return &types.AttributeValueMemberL{Value: slices.Concat(la.Value, lb.Value)}, nil
		}, p.expect(")")
	}
	return p.operand()
}

func (p *parser) removeAction() (action, error) {
	path, err := p.target()
	if err != nil {
		return nil, err
	}
	return func(_, cur item) error { return remove(cur, path) }, nil
}

// setOperand parses the "path :value" of ADD and DELETE.
func (p *parser) setOperand() (docPath, types.AttributeValue, error) {
	path, err := p.target()
	if err != nil {
		return nil, nil, err
	}
	t := p.peek()
	if t.kind != "value" {
		return nil, nil, fmt.Errorf("syntax error: want a value, found %q", t.text)
	}
	p.pos++
	v, err := p.env.value(t.text)
	return path, v, err
}

// addAction adds to a number (a missing one counts as 0) or joins a set.
func (p *parser) addAction() (action, error) {
	path, v, err := p.setOperand()
	if err != nil {
		return nil, err
	}
	return func(old, cur item) error {
		have := resolve(old, path)
		var sum types.AttributeValue
		switch v := v.(type) {
		case *types.AttributeValueMemberN:
			x, ok := numberValue(have)
			if have == nil {
				x, ok = new(big.Rat), true
			}
			y, _ := number(v.Value)
			if !ok || y == nil {
				return errors.New("an operand in the update expression has an incorrect data type")
			}
			sum = formatNumber(x.Add(x, y))
		case *types.AttributeValueMemberSS, *types.AttributeValueMemberNS, *types.AttributeValueMemberBS:
			sum = v
			if have != nil {
				var ok bool
				if sum, ok = combineSets(have, v, true); !ok {
					return errors.New("an operand in the update expression has an incorrect data type: ADD to a set of another type")
				}
			}
		default:
			return errors.New("an operand in the update expression has an incorrect data type: ADD takes a number or a set")
		}
		return assign(cur, path, sum)
	}, nil
}

// deleteAction removes a set's elements; an emptied set is removed, and
// deleting from a missing set does nothing.
func (p *parser) deleteAction() (action, error) {
	path, v, err := p.setOperand()
	if err != nil {
		return nil, err
	}
	return func(old, cur item) error {
		have := resolve(old, path)
		if have == nil {
			return nil
		}
		rest, ok := combineSets(have, v, false)
		if !ok {
			return errors.New("an operand in the update expression has an incorrect data type: DELETE takes a set of the attribute's type")
		}
		if n, _ := size(rest); n == 0 {
			return remove(cur, path)
		}
		return assign(cur, path, rest)
	}, nil
}

// combineSets is ADD's union (add) or DELETE's difference of two sets of
// the same type; ok is false for sets of other types, or no sets.
func combineSets(have, other types.AttributeValue, add bool) (_ types.AttributeValue, ok bool) {
	switch o := other.(type) {
	case *types.AttributeValueMemberSS:
		if h, ok := have.(*types.AttributeValueMemberSS); ok {
			return &types.AttributeValueMemberSS{Value: combine(h.Value, o.Value, add, func(x, y string) bool { return x == y })}, true
		}
	case *types.AttributeValueMemberNS:
		if h, ok := have.(*types.AttributeValueMemberNS); ok {
			return &types.AttributeValueMemberNS{Value: combine(h.Value, o.Value, add, sameNumber)}, true
		}
	case *types.AttributeValueMemberBS:
		if h, ok := have.(*types.AttributeValueMemberBS); ok {
			return &types.AttributeValueMemberBS{Value: combine(h.Value, o.Value, add, bytes.Equal)}, true
		}
	}
	return nil, false
}

func combine[T any](have, other []T, add bool, eq func(x, y T) bool) []T {
	in := func(set []T, x T) bool { return slices.ContainsFunc(set, func(y T) bool { return eq(x, y) }) }
	if !add {
		return slices.DeleteFunc(slices.Clone(have), func(x T) bool { return in(other, x) })
	}
	out := slices.Clone(have)
	for _, x := range other {
		if !in(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// assign writes v at path in it: a top-level attribute, a map key of an
// existing map, or an element of an existing list (past its end: appended).
func assign(it item, path docPath, v types.AttributeValue) error {
	if len(path) == 1 {
		it[path[0].name] = v
		return nil
	}
	parent := resolve(it, path[:len(path)-1])
	last := path[len(path)-1]
	switch p := parent.(type) {
	case *types.AttributeValueMemberM:
		if last.name != "" {
			p.Value[last.name] = v
			return nil
		}
	case *types.AttributeValueMemberL:
		if last.name == "" {
			if last.index < len(p.Value) {
				p.Value[last.index] = v
			} else {
				p.Value = append(p.Value, v)
			}
			return nil
		}
	}
	return fmt.Errorf("the document path provided in the update expression is invalid for update: %s", path)
}

// remove deletes path from it; a path that is not there is left alone.
func remove(it item, path docPath) error {
	if len(path) == 1 {
		delete(it, path[0].name)
		return nil
	}
	switch p := resolve(it, path[:len(path)-1]).(type) {
	case *types.AttributeValueMemberM:
		delete(p.Value, path[len(path)-1].name)
	case *types.AttributeValueMemberL:
		if i := path[len(path)-1].index; path[len(path)-1].name == "" && i < len(p.Value) {
			p.Value = slices.Delete(p.Value, i, i+1)
		}
	}
	return nil
}

// parseProjection parses a projection expression.
func parseProjection(env *exprEnv, expr string) ([]docPath, error) {
	p, err := newParser(env, expr)
	if err != nil {
		return nil, err
	}
	var paths []docPath
	for {
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		paths = append(paths, path)
		if !p.punct(",") {
			break
		}
	}
	return paths, p.end()
}

// project keeps the top-level attributes paths name (whole: the fake does
// not cut nested documents down).
func project(it item, paths []docPath) item {
	out := item{}
	for _, path := range paths {
		if v, ok := it[path[0].name]; ok {
			out[path[0].name] = v
		}
	}
	return out
}
