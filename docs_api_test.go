package errand_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// docPackages are the packages of this module whose names the pages may
// use, by the name a page writes and their directory.
var docPackages = map[string]string{
	"errand":      ".",
	"sqlite":      "sqlite",
	"postgres":    "postgres",
	"errandhttp":  "errandhttp",
	"errandstore": "errandstore",
	"errandtype":  "errandtype",
	"storetest":   "storetest",
	"errandtest":  "errandtest",
}

var (
	// pkg.Name or pkg.Name.Member, not preceded by a word or a dot.
	qualifiedName = regexp.MustCompile(`(?:^|[^\w.])(errand|sqlite|postgres|errandhttp|errandstore|errandtype|storetest|errandtest)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
	// Type.Member in prose, such as Client.EnqueueTx or KindOpts.Timeout.
	typeMember = regexp.MustCompile(`(?:^|[^\w.])([A-Z]\w*)\.([A-Z]\w*)`)
	// client.Method: the pages' name for an *errand.Client.
	clientCall = regexp.MustCompile(`(?:^|[^\w.])client\.([A-Z]\w*)`)
	codeSpan   = regexp.MustCompile("`[^`]+`")
)

// TestDocsNameRealAPIs fails when README.md or a page under docs/ names a
// Go API of this module that the module does not declare: pkg.Name,
// pkg.Type.Member, the keys of a pkg.Type{...} literal and client.Method in
// code blocks and prose code spans, and Type.Member in code spans. A renamed
// function or field then fails here, naming the page and line, instead of
// leaving readers a call that does not compile.
func TestDocsNameRealAPIs(t *testing.T) {
	apis := map[string]*pkgAPI{}
	for name, dir := range docPackages {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("package %s: %v", name, err)
		}
		apis[name] = parseAPI(t, dir)
	}
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append([]string{"README.md"}, pages...) {
		for _, ref := range pageRefs(t, page) {
			switch {
			case resolves(apis, ref):
			case ref.typeOnly:
				t.Errorf("%s: %s: no type %s of this module has a method or field %s", ref.where, ref.name(), ref.ident, ref.member)
			default:
				t.Errorf("%s: %s is not declared in package %s", ref.where, ref.name(), ref.pkg)
			}
		}
	}
}

// docRef is one API a page names: pkg.Ident, or pkg.Ident.Member; with
// typeOnly, Ident.Member in whichever package declares the type Ident.
type docRef struct {
	where         string // page:line
	pkg           string
	ident, member string
	typeOnly      bool
}

func (r docRef) name() string {
	s := r.ident
	if r.member != "" {
		s += "." + r.member
	}
	if r.typeOnly {
		return s
	}
	return r.pkg + "." + s
}

func (r docRef) String() string { return r.where + ": " + r.name() }

// pageRefs returns the APIs a page names: in its code blocks, fenced or
// indented, and in the code spans of its prose.
func pageRefs(t *testing.T, page string) []docRef {
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	prose := make([]string, len(lines))
	var refs []docRef
	var block []string // the fenced block being read
	blockLine := 0
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```") && block == nil:
			block, blockLine = []string{}, i+2
		case strings.HasPrefix(trimmed, "```"):
			refs = append(refs, codeRefs(strings.Join(block, "\n"), page, blockLine, false)...)
			block = nil
		case block != nil:
			block = append(block, line)
		case strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t"):
			refs = append(refs, codeRefs(line, page, i+1, false)...)
		default:
			prose[i] = line
		}
	}
	// A span may run over a line break, so spans are found in the whole
	// prose and placed on the line they start on.
	text := strings.Join(prose, "\n")
	for _, loc := range codeSpan.FindAllStringIndex(text, -1) {
		line := strings.Count(text[:loc[0]], "\n") + 1
		refs = append(refs, codeRefs(text[loc[0]:loc[1]], page, line, true)...)
	}
	return refs
}

// codeRefs returns the names in code that starts on line: qualified names,
// the fields of composite literals of this module's types, client calls,
// and in a prose span Type.Member as well.
func codeRefs(code, page string, line int, span bool) []docRef {
	var refs []docRef
	add := func(at int, r docRef) {
		r.where = page + ":" + strconv.Itoa(line+strings.Count(code[:at], "\n"))
		refs = append(refs, r)
	}
	for _, m := range qualifiedName.FindAllStringSubmatchIndex(code, -1) {
		r := docRef{pkg: code[m[2]:m[3]], ident: code[m[4]:m[5]]}
		if m[6] >= 0 {
			r.member = code[m[6]:m[7]]
		}
		add(m[2], r)
		if m[1] < len(code) && code[m[1]] == '{' && r.member == "" {
			for _, f := range literalFields(code, m[1]) {
				add(f.at, docRef{pkg: r.pkg, ident: r.ident, member: f.name})
			}
		}
	}
	for _, m := range clientCall.FindAllStringSubmatchIndex(code, -1) {
		add(m[2], docRef{pkg: "errand", ident: "Client", member: code[m[2]:m[3]]})
	}
	if span {
		for _, m := range typeMember.FindAllStringSubmatchIndex(code, -1) {
			add(m[2], docRef{ident: code[m[2]:m[3]], member: code[m[4]:m[5]], typeOnly: true})
		}
	}
	return refs
}

type literalField struct {
	name string
	at   int
}

var fieldKey = regexp.MustCompile(`^\s*([A-Z]\w*)\s*:`)

// literalFields returns the keys of the composite literal whose brace is
// at code[open]: the names before a colon at its own depth, after the
// brace or a comma. Strings are skipped, so a brace or colon in one does
// not count.
func literalFields(code string, open int) []literalField {
	var fields []literalField
	depth := 0
	for i := open; i < len(code); i++ {
		switch c := code[i]; c {
		case '"', '`', '\'':
			i = skipString(code, i)
		case '{', '(', '[':
			depth++
		case '}', ')', ']':
			if depth--; depth == 0 {
				return fields
			}
		}
		if c := code[i]; depth == 1 && (c == '{' || c == ',') {
			if m := fieldKey.FindStringSubmatchIndex(code[i+1:]); m != nil {
				fields = append(fields, literalField{name: code[i+1+m[2] : i+1+m[3]], at: i + 1 + m[2]})
			}
		}
	}
	return fields
}

// skipString returns the index of the quote that closes the string or rune
// literal opened at code[i], or the end of code.
func skipString(code string, i int) int {
	q := code[i]
	for j := i + 1; j < len(code); j++ {
		switch {
		case code[j] == '\\' && q != '`':
			j++
		case code[j] == q:
			return j
		}
	}
	return len(code)
}

// resolves reports whether ref names a declared API. A Type.Member whose
// type no package declares is not this module's API and passes.
func resolves(apis map[string]*pkgAPI, ref docRef) bool {
	if !ref.typeOnly {
		api := apis[ref.pkg]
		if !api.idents[ref.ident] {
			return false
		}
		return ref.member == "" || !api.isType(ref.ident) || api.hasMember(apis, ref.ident, ref.member, 0)
	}
	known := false
	for _, api := range apis {
		if api.isType(ref.ident) {
			known = true
			if api.hasMember(apis, ref.ident, ref.member, 0) {
				return true
			}
		}
	}
	return !known
}

// pkgAPI is what one package declares that a page may name.
type pkgAPI struct {
	idents   map[string]bool            // exported top-level names
	members  map[string]map[string]bool // type: its exported methods and fields
	embeds   map[string][]string        // type: the types it embeds, by name in this package
	aliasOf  map[string][2]string       // type: the package and type it is an alias of
	typeDecl map[string]bool
}

func (a *pkgAPI) isType(name string) bool { return a.typeDecl[name] }

// hasMember reports whether typ, or a type it embeds or aliases, has
// member. depth stops a cycle of aliases.
func (a *pkgAPI) hasMember(apis map[string]*pkgAPI, typ, member string, depth int) bool {
	if depth > 8 {
		return false
	}
	if a.members[typ][member] {
		return true
	}
	for _, e := range a.embeds[typ] {
		if a.hasMember(apis, e, member, depth+1) {
			return true
		}
	}
	if al, ok := a.aliasOf[typ]; ok {
		if other := apis[al[0]]; other != nil {
			return other.hasMember(apis, al[1], member, depth+1)
		}
		return true // aliases a package not parsed: trust it
	}
	return false
}

// parseAPI reads the exported API of the package in dir from its source,
// tests left out.
func parseAPI(t *testing.T, dir string) *pkgAPI {
	api := &pkgAPI{idents: map[string]bool{}, members: map[string]map[string]bool{},
		embeds: map[string][]string{}, aliasOf: map[string][2]string{}, typeDecl: map[string]bool{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			api.addDecl(d)
		}
	}
	return api
}

func (a *pkgAPI) addDecl(d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil {
			a.addIdent(d.Name)
		} else if recv := baseTypeName(d.Recv.List[0].Type); recv != "" && d.Name.IsExported() {
			a.addMember(recv, d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				for _, n := range s.Names {
					a.addIdent(n)
				}
			case *ast.TypeSpec:
				a.addType(s)
			}
		}
	}
}

func (a *pkgAPI) addIdent(n *ast.Ident) {
	if n.IsExported() {
		a.idents[n.Name] = true
	}
}

func (a *pkgAPI) addMember(typ, member string) {
	if a.members[typ] == nil {
		a.members[typ] = map[string]bool{}
	}
	a.members[typ][member] = true
}

// addType records a type, its fields or interface methods, what it embeds
// and what it aliases.
func (a *pkgAPI) addType(s *ast.TypeSpec) {
	a.addIdent(s.Name)
	name := s.Name.Name
	a.typeDecl[name] = true
	if sel, ok := s.Type.(*ast.SelectorExpr); ok && s.Assign.IsValid() {
		if pkg, ok := sel.X.(*ast.Ident); ok {
			a.aliasOf[name] = [2]string{pkg.Name, sel.Sel.Name}
		}
		return
	}
	var fields []*ast.Field
	switch st := s.Type.(type) {
	case *ast.StructType:
		fields = st.Fields.List
	case *ast.InterfaceType:
		fields = st.Methods.List
	}
	for _, f := range fields {
		if len(f.Names) == 0 {
			if e := baseTypeName(f.Type); e != "" {
				a.embeds[name] = append(a.embeds[name], e)
				a.addMember(name, e)
			}
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				a.addMember(name, n.Name)
			}
		}
	}
}

// baseTypeName is T of T, *T, T[P] and *T[P, Q]; "" for another package's
// type or anything else.
func baseTypeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return baseTypeName(e.X)
	case *ast.IndexExpr:
		return baseTypeName(e.X)
	case *ast.IndexListExpr:
		return baseTypeName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// TestDocsNameRealAPIsSeesAMistake keeps the check above able to fail: a
// page that names a function, a method or a field that does not exist is
// reported, and the real names beside them are not.
func TestDocsNameRealAPIsSeesAMistake(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "page.md")
	text := "Call `errand.NewClient` and `Client.EnqueueTx`, then `client.Wake()`.\n\n" +
		"```go\nerrand.NewClinet(store, nil)\nclient.Enqeue(ctx, args, &errand.EnqueueOpts{ID: \"a{\", MaxAtempts: 5,\n\tQueue: \"q\", Unique: &errand.UniqueOpts{Key: \"k\"}})\n```\n\n" +
		"Set `KindOpts.Timout` and `sqlite.Open`; `Foo.Bar` is no API.\n"
	if err := os.WriteFile(page, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	apis := map[string]*pkgAPI{"errand": parseAPI(t, "."), "sqlite": parseAPI(t, "sqlite")}
	var missing []string
	for _, ref := range pageRefs(t, page) {
		if !resolves(apis, ref) {
			missing = append(missing, strings.TrimPrefix(ref.String(), page+":"))
		}
	}
	sort.Strings(missing)
	want := []string{"4: errand.NewClinet", "5: errand.Client.Enqeue", "5: errand.EnqueueOpts.MaxAtempts", "9: KindOpts.Timout"}
	if strings.Join(missing, "|") != strings.Join(want, "|") {
		t.Fatalf("reported %q, want %q", missing, want)
	}
}

// TestDocsIndexListsEveryPage fails when a page under docs/ is missing from
// the index, docs/README.md, where readers find the pages.
func TestDocsIndexListsEveryPage(t *testing.T) {
	index, err := os.ReadFile("docs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		name := filepath.Base(page)
		if name != "README.md" && !strings.Contains(string(index), "]("+name+")") {
			t.Errorf("docs/README.md does not link to %s", name)
		}
	}
}
