package sqlite

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/msgcenter/msgcenter/store"
)

// The apply log: a send, a claim or a state change is acknowledged once it
// is in this file, not once SQLite has committed it.
//
// A post_send's SQLite commit writes every page the send touched (its two
// records with their indexes, events, conversations) to the
// WAL: about 27 pages for a 1 KiB message, a third of the writer's time.
// Pages shared by consecutive writes (the tail of each table and index,
// the conversation) are written once per commit, however
// many writes changed them. So the writer keeps one transaction open across
// groups of these writes, appends each group's entries to this log with one
// write (and fdatasync with --durability full) before answering, and
// commits the transaction every few tens of milliseconds (commit.go).
//
// This is command logging: the log holds the operations, not their effects.
// Replaying the writes that came after the last commit, in log order, on
// the committed state gives the same records, seqs, leases and event ids
// as the first time, because nothing else ran in between (any other kind
// of write commits first, commit.go), each of these writes is a function
// of the state and its parameters (a claim takes the lowest visible seq, a
// state change is a compare-and-set), and the store never reads the clock
// (a write carries its time). The commit records the last sequence number
// handed out in the database, in the same transaction, so no entry is
// applied twice; after it the log is truncated.
//
// File: a header naming the format (logMagic), then entries. Entry: length
// of the payload (uint32), CRC-32C of the sequence number and the payload
// (uint32), sequence number (uint64), payload (a kind byte, then the
// write's parameters as JSON). A torn or corrupt entry ends the log: only
// an entry whose write had completed was acknowledged, and a failed write
// is cut off before the next one (append).

// logFileSuffix names the log next to the database. Not "-journal": that
// is SQLite's rollback journal, which it would try to roll back.
const logFileSuffix = ".applylog"

// logMagic starts the file and names the entry format. A binary that finds
// another format refuses to replay it rather than misread it (the JSON of
// the parameters follows the Go types of the binary that wrote it).
var logMagic = []byte("MCAPLOG1")

const logHeaderSize = 16

// maxEntry bounds an entry's length field before anything is allocated for
// it: the field is not covered by the checksum.
const maxEntry = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logFile is what the log needs of its file (an *os.File; tests wrap it to
// make calls fail).
type logFile interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (os.FileInfo, error)
	Name() string
	Close() error
}

// applyLog is written by the writer goroutine only.
type applyLog struct {
	f    logFile
	size int64 // where the next entry goes
	// dirty: bytes may be in the file beyond the header (a failed append
	// included), so reset must truncate.
	dirty  bool
	sync   bool // fdatasync before acknowledging (durability full)
	buf    []byte
	unlock func()
}

// Kinds of logged write, the payload's first byte.
const (
	logApply  = 'A'
	logClaim  = 'C'
	logUpdate = 'U'
)

// loggedWrite is one entry: exactly one of the parameters is set.
type loggedWrite struct {
	seq    uint64
	apply  *store.Plan
	claim  *store.ClaimParams
	update *store.Update
}

// encode is the entry's payload.
func (w *loggedWrite) encode() ([]byte, error) {
	var kind byte
	var v any
	switch {
	case w.apply != nil:
		return encodePlan(w.apply)
	case w.claim != nil:
		kind, v = logClaim, w.claim
	default:
		kind, v = logUpdate, w.update
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("sqlite: encode write for the apply log: %w", err)
	}
	return append([]byte{kind}, b...), nil
}

func decodeWrite(seq uint64, payload []byte) (loggedWrite, error) {
	w := loggedWrite{seq: seq}
	if len(payload) == 0 {
		return w, fmt.Errorf("sqlite: apply log entry %d is empty", seq)
	}
	var v any
	switch payload[0] {
	case logApply:
		w.apply = new(store.Plan)
		v = w.apply
	case logClaim:
		w.claim = new(store.ClaimParams)
		v = w.claim
	case logUpdate:
		w.update = new(store.Update)
		v = w.update
	default:
		return w, fmt.Errorf("sqlite: apply log entry %d has unknown kind %q", seq, payload[0])
	}
	dec := json.NewDecoder(bytes.NewReader(payload[1:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return w, fmt.Errorf("sqlite: apply log entry %d: %w", seq, err)
	}
	return w, nil
}

// openApplyLog opens (creating) the log and takes an exclusive lock on it:
// the log, the overlay and the writer's open transaction belong to one
// Store, and a second one on the same database (a second process, or
// `msgcenter migrate` beside a running server) would replay or truncate
// entries the first has not committed.
func openApplyLog(path string, sync bool) (*applyLog, error) {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open apply log: %w", err)
	}
	unlock, err := lockFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sqlite: %s is open in another process (a running msgcenter serve?): %w", filepath.Dir(path), err)
	}
	l := &applyLog{f: f, sync: sync, unlock: unlock}
	if sync && os.IsNotExist(statErr) {
		// A new file's name is in its directory only once the directory is
		// synced: an OS crash must not take the log, and with it writes
		// already answered from it, away.
		if err := syncDir(filepath.Dir(path)); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sqlite: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sqlite: sync %s: %w", dir, err)
	}
	return nil
}

// errLogStuck is an append whose failed bytes could not be cut off: the
// log cannot take another entry safely.
var errLogStuck = errors.New("sqlite: apply log could not be cut back after a failed write")

// append writes the entries (seq, payload) in one write. On failure the
// file is cut back to where it was, so a later entry never follows a torn
// one; if even that fails the error wraps errLogStuck.
func (l *applyLog) append(seqs []uint64, payloads [][]byte) error {
	l.buf = l.buf[:0]
	for i, p := range payloads {
		var h [logHeaderSize]byte
		binary.LittleEndian.PutUint32(h[0:4], uint32(len(p)))
		binary.LittleEndian.PutUint64(h[8:16], seqs[i])
		crc := crc32.Update(0, castagnoli, h[8:16])
		binary.LittleEndian.PutUint32(h[4:8], crc32.Update(crc, castagnoli, p))
		l.buf = append(append(l.buf, h[:]...), p...)
	}
	l.dirty = true
	if _, err := l.f.WriteAt(l.buf, l.size); err != nil {
		return l.cutBack(fmt.Errorf("sqlite: apply log write: %w", err))
	}
	if l.sync {
		if err := l.f.Sync(); err != nil {
			// The entries may or may not be on disk. The writer commits
			// their writes instead, with their sequence numbers, so that
			// whatever survives here is skipped (commit.go).
			return l.cutBack(fmt.Errorf("sqlite: apply log sync: %w", err))
		}
	}
	l.size += int64(len(l.buf))
	if cap(l.buf) > 1<<20 {
		l.buf = nil // one huge fan-out should not pin its buffer
	}
	return nil
}

func (l *applyLog) cutBack(cause error) error {
	if err := l.f.Truncate(l.size); err != nil {
		return fmt.Errorf("%w (%w): %w", errLogStuck, cause, err)
	}
	return cause
}

// reset empties the log once a commit covers everything in it.
func (l *applyLog) reset() error {
	if !l.dirty {
		return nil
	}
	if err := l.f.Truncate(int64(len(logMagic))); err != nil {
		return fmt.Errorf("sqlite: truncate apply log: %w", err)
	}
	l.size, l.dirty = int64(len(logMagic)), false
	return nil
}

// readAll returns the entries in the file, in order, up to the first torn
// or corrupt one, cuts off anything after them, and says how many bytes
// that was. A new (empty) file gets its header.
func (l *applyLog) readAll() (entries []loggedWrite, dropped int64, err error) {
	fi, err := l.f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: read apply log: %w", err)
	}
	if fi.Size() == 0 {
		if _, err := l.f.WriteAt(logMagic, 0); err != nil {
			return nil, 0, fmt.Errorf("sqlite: write apply log header: %w", err)
		}
		l.size = int64(len(logMagic))
		return nil, 0, nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(l.f, 0, fi.Size()), 1<<16)
	magic := make([]byte, len(logMagic))
	if _, err := io.ReadFull(r, magic); err != nil || !bytes.Equal(magic, logMagic) {
		return nil, 0, fmt.Errorf("sqlite: %s is not an apply log this msgcenter can read (header %q): start the version that wrote it to replay it, or move it aside to start without the writes it holds", l.f.Name(), magic)
	}
	good := int64(len(logMagic))
	for {
		var h [logHeaderSize]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			break // end of the log, or a torn header
		}
		n := int64(binary.LittleEndian.Uint32(h[0:4]))
		if n > maxEntry || good+logHeaderSize+n > fi.Size() {
			break // torn, or a corrupt length
		}
		seq := binary.LittleEndian.Uint64(h[8:16])
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			break
		}
		crc := crc32.Update(0, castagnoli, h[8:16])
		if crc32.Update(crc, castagnoli, payload) != binary.LittleEndian.Uint32(h[4:8]) {
			break
		}
		w, err := decodeWrite(seq, payload)
		if err != nil {
			return nil, 0, fmt.Errorf("%w (move %s aside to start without the writes it holds)", err, l.f.Name())
		}
		entries = append(entries, w)
		good += logHeaderSize + n
	}
	if good < fi.Size() {
		if err := l.f.Truncate(good); err != nil {
			return nil, 0, fmt.Errorf("sqlite: cut torn apply log tail: %w", err)
		}
	}
	l.size, l.dirty = good, good > int64(len(logMagic))
	return entries, fi.Size() - good, nil
}

func (l *applyLog) close() error {
	if l == nil {
		return nil
	}
	l.unlock()
	return l.f.Close()
}
