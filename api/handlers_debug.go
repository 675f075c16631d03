package api

import (
	"net/http"
	"net/http/pprof"
	"runtime"
	rpprof "runtime/pprof"
	"time"

	"github.com/msgcenter/msgcenter/model"
)

// debugPprof serves Go's profiles to admins only: a CPU profile shows what
// requests do, a heap profile what they hold, and neither is for everyone.
// {profile} is profile (CPU, ?seconds=N), trace, cmdline, symbol, or any
// runtime profile: heap, allocs, goroutine, block, mutex, threadcreate.
func (a *API) debugPprof(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	if who.Role != model.RoleAdmin {
		return model.Forbidden("profiles need an admin token")
	}
	// The server has no write timeout, so a 30 s CPU profile goes through;
	// clearing any deadline makes that explicit.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	switch name := r.PathValue("profile"); name {
	case "profile":
		pprof.Profile(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	default:
		if rpprof.Lookup(name) == nil {
			return model.NotFound("profile " + name)
		}
		if name == "block" || name == "mutex" {
			a.contention.Do(enableContention)
		}
		pprof.Handler(name).ServeHTTP(w, r)
	}
	return nil
}

// enableContention turns on block and mutex sampling, the first time such
// a profile is asked for: off by default, it costs nothing until needed.
func enableContention() {
	runtime.SetBlockProfileRate(10_000) // one sample per 10 µs blocked
	runtime.SetMutexProfileFraction(100)
}
