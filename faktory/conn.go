package faktory

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand/errandstore"
)

// Faktory's HELLO: the protocol version and, with a password, the salt
// and iteration count of the hash the client proves it with.
const protocolVersion = 2

// Iterations of the password hash, chosen per connection as Faktory
// chooses them, so that a recorded HELLO is no good on another connection.
const (
	minHashIterations = 4000
	hashIterationSpan = 4096
)

// maxWIDBytes bounds a worker id.
const maxWIDBytes = 128

// maxErrorBytes bounds the message of an -ERR answer.
const maxErrorBytes = 1024

var (
	errLineTooLong = errors.New("command line too long")
	// errIdle: no command began within IdleTimeout.
	errIdle = errors.New("idle")
)

// conn is one client connection. Its methods run on its own goroutine.
type conn struct {
	s      *Server
	nc     net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	opened time.Time

	salt       string // "" without a password
	iterations int

	hello bool   // a valid HELLO was received
	wid   string // the worker id of the HELLO; "" for a producer
	owner string // the lease owner of its claims: "faktory:" + wid
}

func newConn(s *Server, nc net.Conn) *conn {
	return &conn{s: s, nc: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc), opened: time.Now()}
}

// serve greets the client and answers its commands until it ends, fails,
// or the server closes.
func (c *conn) serve() {
	defer func() {
		c.nc.Close()
		if c.wid != "" {
			c.s.res.detach(c.wid)
		}
	}()
	if err := c.greet(); err != nil {
		return
	}
	for {
		line, err := c.readLine()
		if err != nil {
			c.readFailed(err)
			return
		}
		c.s.commands.Add(1)
		keep := c.dispatch(line)
		if err := c.flush(); err != nil || !keep {
			return
		}
	}
}

// greet writes +HI, with a fresh salt and iteration count when the server
// has a password.
func (c *conn) greet() error {
	hi := map[string]any{"v": protocolVersion}
	if c.s.opts.Password != "" {
		c.salt = rand.Text()
		n, err := rand.Int(rand.Reader, big.NewInt(hashIterationSpan))
		if err != nil {
			return err
		}
		c.iterations = minHashIterations + int(n.Int64())
		hi["s"], hi["i"] = c.salt, c.iterations
	}
	b, err := json.Marshal(hi)
	if err != nil {
		return err
	}
	c.w.WriteString("+HI ")
	c.w.Write(b)
	c.w.WriteString("\r\n")
	return c.flush()
}

// readFailed answers, when it still can, why a line could not be read.
func (c *conn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, errIdle):
		// Closed without a word: a pooled client that is not waiting for
		// an answer would take one for the answer to its next command.
		return
	case errors.Is(err, errLineTooLong):
		c.writeErr(fmt.Sprintf("command line over %d bytes; push fewer or smaller jobs at once (the connection is closed)", c.s.opts.MaxLineBytes))
	case !c.hello && errors.As(err, &ne) && ne.Timeout():
		c.writeErr(fmt.Sprintf("no HELLO within %s of connecting (the connection is closed)", c.s.opts.HandshakeTimeout))
	case errors.As(err, &ne) && ne.Timeout():
		c.writeErr("timed out reading a command (the connection is closed)")
	default:
		return // the client went away
	}
	c.flush()
}

// readLine reads one command line without its line ending. Before the
// HELLO the whole handshake must fit in HandshakeTimeout; after it, the
// connection may idle for IdleTimeout, and a line that has begun must end
// within LineTimeout, so that a slow client holds a goroutine only so
// long.
func (c *conn) readLine() (string, error) {
	o := &c.s.opts
	if !c.hello {
		c.nc.SetReadDeadline(c.opened.Add(o.HandshakeTimeout))
	} else {
		c.nc.SetReadDeadline(time.Now().Add(o.IdleTimeout))
		if _, err := c.r.Peek(1); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return "", errIdle
			}
			return "", err
		}
		c.nc.SetReadDeadline(time.Now().Add(o.LineTimeout))
	}
	var line []byte
	for {
		frag, err := c.r.ReadSlice('\n')
		if len(line)+len(frag) > o.MaxLineBytes+2 { // +2: the line ending
			return "", errLineTooLong
		}
		line = append(line, frag...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return "", err
		}
	}
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	return string(line), nil
}

// dispatch answers one command line; it reports whether to keep the
// connection.
func (c *conn) dispatch(line string) bool {
	verb, arg, _ := strings.Cut(line, " ")
	if verb == "END" {
		return false
	}
	if verb == "HELLO" {
		return c.helloCmd(arg)
	}
	if !c.hello {
		c.writeErr(fmt.Sprintf("send HELLO first: %s needs a HELLO {...} after the server's +HI", oneWord(verb)))
		return true
	}
	if cmd, ok := commands[verb]; ok {
		cmd(c, arg)
		return true
	}
	if why, ok := unsupported[verb]; ok {
		c.writeErr(fmt.Sprintf("%s is not supported by errand's Faktory server: %s; see docs/faktory.md", verb, why))
		return true
	}
	c.writeErr(fmt.Sprintf("unknown command %s; errand's Faktory server answers HELLO, PUSH, PUSHB, FETCH, ACK, FAIL, BEAT, INFO and END", oneWord(verb)))
	return true
}

// helloMsg is the client's HELLO.
type helloMsg struct {
	Hostname string   `json:"hostname"`
	WID      string   `json:"wid"`
	PID      int      `json:"pid"`
	Labels   []string `json:"labels"`
	Version  int      `json:"v"`
	PwdHash  string   `json:"pwdhash"`
}

// helloCmd checks the HELLO: a wrong password closes the connection.
func (c *conn) helloCmd(arg string) bool {
	if c.hello {
		c.writeErr("HELLO was already given on this connection")
		return true
	}
	var h helloMsg
	if err := json.Unmarshal([]byte(arg), &h); err != nil {
		c.writeErr("HELLO: " + jsonProblem(err) + `; send HELLO {"v":2,"hostname":...,"wid":...}`)
		return true
	}
	if c.s.opts.Password != "" {
		if h.PwdHash == "" {
			c.writeErr("this server needs a password: give the client the password (FAKTORY_URL=tcp://:PASSWORD@HOST:PORT)")
			return false
		}
		want := passwordHash(c.s.opts.Password, c.salt, c.iterations)
		if subtle.ConstantTimeCompare([]byte(h.PwdHash), []byte(want)) != 1 {
			c.s.log.Warn("faktory: wrong password", "remote", c.nc.RemoteAddr().String())
			c.writeErr("invalid password")
			return false
		}
	}
	if h.WID != "" {
		if err := errandstore.CheckIdentifier("wid", h.WID, maxWIDBytes); err != nil {
			c.writeErr("HELLO: " + err.Error())
			return true
		}
		c.wid, c.owner = h.WID, "faktory:"+h.WID
		c.s.res.attach(c.wid)
	}
	c.hello = true
	c.writeOK()
	return true
}

// passwordHash is Faktory's proof of the password: SHA-256 of the
// password followed by the salt, hashed again iterations-1 times over the
// raw digest, in lowercase hex.
func passwordHash(password, salt string, iterations int) string {
	sum := sha256.Sum256([]byte(password + salt))
	for i := 1; i < iterations; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return hex.EncodeToString(sum[:])
}

// Answers. Errors are written on one line: a client's text quoted in one
// cannot start a line of its own.

func (c *conn) writeOK() { c.w.WriteString("+OK\r\n") }

func (c *conn) writeErr(msg string) {
	c.w.WriteString("-ERR ")
	c.w.WriteString(oneLine(msg, maxErrorBytes))
	c.w.WriteString("\r\n")
}

// writeBulk writes b as a bulk string; nil is the null answer.
func (c *conn) writeBulk(b []byte) {
	if b == nil {
		c.w.WriteString("$-1\r\n")
		return
	}
	c.w.WriteString("$")
	c.w.WriteString(strconv.Itoa(len(b)))
	c.w.WriteString("\r\n")
	c.w.Write(b)
	c.w.WriteString("\r\n")
}

// writeJSON writes v as a bulk string of JSON.
func (c *conn) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.writeErr("internal error: " + err.Error())
		return
	}
	c.writeBulk(b)
}

// flush sends what was written, within WriteTimeout.
func (c *conn) flush() error {
	c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	return c.w.Flush()
}

// oneLine returns s as one line of valid UTF-8 of at most max bytes.
func oneLine(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// oneWord quotes a client's verb in an answer, bounded.
func oneWord(s string) string {
	return strconv.Quote(oneLine(s, 40))
}

// jsonProblem says what is wrong with a JSON document, naming the field
// when the problem is a field's type.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %s is %s, want %s", te.Field, te.Value, jsonKind(te.Type.Kind().String()))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err)
	}
	return "invalid JSON: " + err.Error()
}

// jsonKind names a Go kind as JSON names it.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "a number"
	case k == "string":
		return "a string"
	case k == "slice":
		return "an array"
	case k == "map", k == "struct":
		return "an object"
	case k == "bool":
		return "true or false"
	}
	return k
}
