package ghfake

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Control routes: JSON in, JSON out, for a process (`make run`, an
// end-to-end test) that cannot call the Go methods.
const (
	// ControlState: GET → State (runners, counters, faults, rates).
	ControlState = "GET /_fake/state"
	// ControlReset: POST → forget everything (Reset).
	ControlReset = "POST /_fake/reset"
	// ControlAddFault: POST {"route", "count", "fault": Fault} (Fail).
	ControlAddFault = "POST /_fake/faults"
	// ControlClearFaults: DELETE (ClearFaults).
	ControlClearFaults = "DELETE /_fake/faults"
	// ControlRunner: PATCH {"status"?, "busy"?} on runners with that name.
	ControlRunner = "PATCH /_fake/runners/{name}"
	// ControlJob: PUT Job (its id comes from the path) (SetJob).
	ControlJob = "PUT /_fake/jobs/{owner}/{repo}/{job_id}"
	// ControlRate: PUT Rate (SetRateLimit); GET → Rate.
	ControlRate    = "PUT /_fake/rate/{installation_id}"
	ControlGetRate = "GET /_fake/rate/{installation_id}"
	// ControlToken: POST → {"token": "ghs_…"} for the installation
	// (IssueToken), so a script can call the API without an App JWT.
	ControlToken = "POST /_fake/tokens/{installation_id}"
)

// State is what GET /_fake/state answers.
type State struct {
	Runners []Runner `json:"runners"`
	Stats   Stats    `json:"stats"`
	// Faults are the programmed faults still pending, in order; Count is
	// what is left (< 1: forever).
	Faults []FaultRequest `json:"faults"`
}

// FaultRequest is the body of POST /_fake/faults.
type FaultRequest struct {
	Route string `json:"route"`
	Count int    `json:"count"`
	Fault Fault  `json:"fault"`
}

// RunnerPatch is the body of PATCH /_fake/runners/{name}.
type RunnerPatch struct {
	Status *string `json:"status"`
	Busy   *bool   `json:"busy"`
}

func (s *Server) controlMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc(ControlState, func(w http.ResponseWriter, r *http.Request) {
		st := State{Runners: s.Runners(), Stats: s.Stats(), Faults: []FaultRequest{}}
		s.mu.Lock()
		for _, f := range s.faults {
			st.Faults = append(st.Faults, FaultRequest{Route: f.route, Count: f.left, Fault: f.fault})
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, st)
	})
	m.HandleFunc(ControlReset, func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc(ControlAddFault, func(w http.ResponseWriter, r *http.Request) {
		var req FaultRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		if err := req.Fault.Validate(); err != nil {
			controlError(w, http.StatusUnprocessableEntity, err)
			return
		}
		if req.Route == "" {
			controlError(w, http.StatusUnprocessableEntity, errors.New("route: required (a route pattern or \"*\")"))
			return
		}
		s.Fail(req.Route, req.Count, req.Fault)
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc(ControlClearFaults, func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc(ControlRunner, func(w http.ResponseWriter, r *http.Request) {
		var p RunnerPatch
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		name := r.PathValue("name")
		cur, ok := s.RunnerByName(name)
		if !ok {
			controlError(w, http.StatusNotFound, ErrNoRunner)
			return
		}
		status, busy := cur.Status, cur.Busy
		if p.Status != nil {
			status = *p.Status
		}
		if p.Busy != nil {
			busy = *p.Busy
		}
		if err := s.SetRunner(name, status, busy); err != nil {
			controlError(w, http.StatusNotFound, err)
			return
		}
		cur, _ = s.RunnerByName(name)
		writeJSON(w, http.StatusOK, cur)
	})
	m.HandleFunc(ControlJob, func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("job_id"), 10, 64)
		if err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		var j Job
		if err := json.NewDecoder(r.Body).Decode(&j); err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		j.ID = id
		s.SetJob(r.PathValue("owner"), r.PathValue("repo"), j)
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc(ControlRate, func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("installation_id"), 10, 64)
		if err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		var rt Rate
		if err := json.NewDecoder(r.Body).Decode(&rt); err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		s.SetRateLimit(id, rt.Limit, rt.Remaining, time.Unix(rt.Reset, 0))
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc(ControlGetRate, func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("installation_id"), 10, 64)
		if err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, s.RateLimit(id))
	})
	m.HandleFunc(ControlToken, func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("installation_id"), 10, 64)
		if err != nil || id <= 0 {
			controlError(w, http.StatusBadRequest, errors.New("installation_id: want a positive integer"))
			return
		}
		writeJSON(w, http.StatusCreated, map[string]string{"token": s.IssueToken(id)})
	})
	return m
}

func controlError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
