package ghfake

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	docsJITRepo    = "https://docs.github.com/rest/actions/self-hosted-runners#create-configuration-for-a-just-in-time-runner-for-a-repository"
	docsJITOrg     = "https://docs.github.com/rest/actions/self-hosted-runners#create-configuration-for-a-just-in-time-runner-for-an-organization"
	docsRunnerRepo = "https://docs.github.com/rest/actions/self-hosted-runners#delete-a-self-hosted-runner-from-a-repository"
	docsRunnerOrg  = "https://docs.github.com/rest/actions/self-hosted-runners#delete-a-self-hosted-runner-from-an-organization"
	docsJob        = "https://docs.github.com/rest/actions/workflow-jobs#get-a-job-for-a-workflow-run"
	docsToken      = "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"
	maxJWTLifetime = 10 * time.Minute
	// maxJITLabels is generate-jitconfig's labels maxItems (GitHub's
	// OpenAPI description); maxRunnerName the runner name's length limit
	// (64 characters: the runner application's own, which GitHub enforces).
	maxJITLabels  = 100
	maxRunnerName = 64
	// defaultWorkFolder is generate-jitconfig's work_folder default (its
	// OpenAPI description).
	defaultWorkFolder = "_work"
)

// scopeOf reads the scope of a runner route from its path values.
func scopeOf(r *http.Request) (scope, owner, repo string) {
	if org := r.PathValue("org"); org != "" {
		return ScopeOrg, org, ""
	}
	return ScopeRepo, r.PathValue("owner"), r.PathValue("repo")
}

func sameScope(rn *Runner, scope, owner, repo string) bool {
	return rn.Scope == scope && strings.EqualFold(rn.Owner, owner) && strings.EqualFold(rn.Repo, repo)
}

func jobKey(owner, repo string, id int64) string {
	return strings.ToLower(owner) + "/" + strings.ToLower(repo) + "#" + strconv.FormatInt(id, 10)
}

// accessToken mints an installation token for a valid App JWT.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("installation_id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusNotFound, "Not Found", docsToken)
		return
	}
	if msg := s.checkJWT(bearer(r)); msg != "" {
		writeError(w, http.StatusUnauthorized, msg, docsREST)
		return
	}
	if status, msg := s.exchangeRefusal(id); status != 0 {
		writeError(w, status, msg, docsToken)
		return
	}
	s.mu.Lock()
	tok, exp := s.issue(id)
	perms := s.permissionsOf(id)
	selection := s.installs[id].selection()
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"token":                tok,
		"expires_at":           exp.Format(time.RFC3339),
		"permissions":          perms,
		"repository_selection": selection,
	})
}

// checkJWT returns GitHub's message for a JWT it would refuse, or "".
func (s *Server) checkJWT(tok string) string {
	const undecodable = "A JSON web token could not be decoded"
	parts := strings.Split(tok, ".")
	if tok == "" || len(parts) != 3 {
		return undecodable
	}
	var head struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Iat *int64          `json:"iat"`
		Exp *int64          `json:"exp"`
	}
	if decodeSegment(parts[0], &head) != nil || decodeSegment(parts[1], &claims) != nil || head.Alg != "RS256" {
		return undecodable
	}
	s.mu.Lock()
	pub := s.pub // SetPublicKey may replace it
	s.mu.Unlock()
	if pub != nil {
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil {
			return undecodable
		}
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
			return undecodable
		}
	}
	// GitHub dates the claims by its own clock: an iat ahead of it, an exp
	// behind it or more than ten minutes ahead is refused (a client whose
	// clock drifts sees these; GitHub's advice is iat 60 s in the past).
	now := s.now().Unix()
	if claims.Iat == nil || *claims.Iat > now {
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued."
	}
	if claims.Exp == nil || time.Duration(*claims.Exp-*claims.Iat)*time.Second > maxJWTLifetime ||
		time.Duration(*claims.Exp-now)*time.Second > maxJWTLifetime {
		return "'Expiration time' claim ('exp') is too far in the future"
	}
	if *claims.Exp <= now {
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires."
	}
	if s.appID != 0 {
		// GitHub accepts the app id as a JSON number or string.
		iss := strings.Trim(string(claims.Iss), `"`)
		if iss != strconv.FormatInt(s.appID, 10) {
			return "'Issuer' claim ('iss') must be an Integer"
		}
	}
	return ""
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// jitRequest is the body of generate-jitconfig.
type jitRequest struct {
	Name          string   `json:"name"`
	RunnerGroupID *int64   `json:"runner_group_id"`
	Labels        []string `json:"labels"`
	WorkFolder    string   `json:"work_folder"`
}

func (s *Server) generateJIT(w http.ResponseWriter, r *http.Request) {
	scope, owner, repo := scopeOf(r)
	doc := docsJITRepo
	if scope == ScopeOrg {
		doc = docsJITOrg
	}
	var req jitRequest
	if err := decodeJSONBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON", doc)
		return
	}
	// GitHub's description gives this route's 422 the "simple" validation
	// shape (a message, no field objects): the problem is in the message.
	invalid := ""
	switch {
	case strings.TrimSpace(req.Name) == "":
		invalid = `"name" wasn't supplied.`
	case len([]rune(req.Name)) > maxRunnerName:
		invalid = fmt.Sprintf(`"name" is too long (maximum is %d characters).`, maxRunnerName)
	case len(req.Labels) == 0:
		invalid = `"labels" wasn't supplied.`
	case len(req.Labels) > maxJITLabels:
		invalid = fmt.Sprintf(`"labels" has %d items; the maximum is %d.`, len(req.Labels), maxJITLabels)
	case slices.ContainsFunc(req.Labels, func(l string) bool { return strings.TrimSpace(l) == "" }):
		invalid = `"labels" contains an empty label.`
	case req.RunnerGroupID == nil || !s.hasGroup(scope, *req.RunnerGroupID):
		invalid = `"runner_group_id" is not a runner group of this scope.`
	}
	if req.WorkFolder == "" {
		// GitHub's description: work_folder defaults to "_work".
		req.WorkFolder = defaultWorkFolder
	}
	if invalid != "" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n"+invalid, doc)
		return
	}
	inst, _ := r.Context().Value(ctxKey{}).(int64)
	s.mu.Lock()
	s.expireRunners() // an expired runner's name is free again
	for _, rn := range s.runners {
		if sameScope(rn, scope, owner, repo) && strings.EqualFold(rn.Name, req.Name) {
			s.mu.Unlock()
			writeError(w, http.StatusConflict,
				fmt.Sprintf("Already exists - A runner with the name %s already exists.", req.Name), doc)
			return
		}
	}
	s.runnerSeq++
	rn := &Runner{
		ID: s.runnerSeq, Name: req.Name, Scope: scope, Owner: owner, Repo: repo,
		OS: "unknown", Status: "offline", Labels: slices.Clone(req.Labels),
		RunnerGroupID: *req.RunnerGroupID, WorkFolder: req.WorkFolder, Installation: inst,
		seen: s.now(),
	}
	s.runners[rn.ID] = rn
	out := apiRunner(rn)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"runner":             out,
		"encoded_jit_config": s.encodeJIT(rn),
	})
}

// hasGroup reports whether id is a runner group of the scope: any of the
// organisation's (WithRunnerGroups) at org scope; only the Default group
// at a repository, which has no runner groups of its own (they are an
// organisation's or an enterprise's). GitHub's exact answer to another
// group at a repository is not documented; the fake refuses it like an
// unknown group, as the safer stand-in: a pool that relies on it fails here
// as it would fail, or be silently put in Default, on GitHub.
func (s *Server) hasGroup(scope string, id int64) bool {
	if scope == ScopeRepo {
		return id == defaultRunnerGroupID
	}
	return s.groups[id]
}

type apiLabel struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

type apiRunnerBody struct {
	ID     int64      `json:"id"`
	Name   string     `json:"name"`
	OS     string     `json:"os"`
	Status string     `json:"status"`
	Busy   bool       `json:"busy"`
	Labels []apiLabel `json:"labels"`
}

// apiRunner renders a runner as GitHub does. Callers hold s.mu.
func apiRunner(rn *Runner) apiRunnerBody {
	out := apiRunnerBody{ID: rn.ID, Name: rn.Name, OS: rn.OS, Status: rn.Status, Busy: rn.Busy, Labels: []apiLabel{}}
	for i, l := range rn.Labels {
		typ := "custom"
		if strings.EqualFold(l, "self-hosted") {
			typ = "read-only"
		}
		out.Labels = append(out.Labels, apiLabel{ID: int64(i + 1), Name: l, Type: typ})
	}
	return out
}

// sortedRunners returns copies of the runners keep accepts, by id.
// Callers hold s.mu.
func (s *Server) sortedRunners(keep func(*Runner) bool) []Runner {
	s.expireRunners()
	out := []Runner{}
	for _, rn := range s.runners {
		if keep(rn) {
			c := *rn
			c.Labels = slices.Clone(rn.Labels)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Runner) int { return int(a.ID - b.ID) })
	return out
}

func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) {
	scope, owner, repo := scopeOf(r)
	name := r.URL.Query().Get("name")
	s.mu.Lock()
	var all []apiRunnerBody
	for _, rn := range s.sortedRunners(func(rn *Runner) bool {
		return sameScope(rn, scope, owner, repo) && (name == "" || strings.EqualFold(rn.Name, name))
	}) {
		all = append(all, apiRunner(&rn))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"total_count": len(all),
		"runners":     page(w, r, all),
	})
}

func atoiDefault(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// lookupRunner finds the route's runner in its scope. Callers hold s.mu.
func (s *Server) lookupRunner(r *http.Request) *Runner {
	scope, owner, repo := scopeOf(r)
	id, err := strconv.ParseInt(r.PathValue("runner_id"), 10, 64)
	if err != nil {
		return nil
	}
	s.expireRunners()
	rn := s.runners[id]
	if rn == nil || !sameScope(rn, scope, owner, repo) {
		return nil
	}
	return rn
}

func runnerDocs(r *http.Request) string {
	if r.PathValue("org") != "" {
		return docsRunnerOrg
	}
	return docsRunnerRepo
}

func (s *Server) getRunner(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rn := s.lookupRunner(r)
	var out apiRunnerBody
	if rn != nil {
		out = apiRunner(rn)
	}
	s.mu.Unlock()
	if rn == nil {
		writeError(w, http.StatusNotFound, "Not Found", runnerDocs(r))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteRunner(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rn := s.lookupRunner(r)
	switch {
	case rn == nil:
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found", runnerDocs(r))
	case rn.Busy:
		// GitHub's message, stray closing quote included (as clients
		// have logged it; GitHub documents no message for it).
		name := rn.Name
		s.mu.Unlock()
		writeError(w, http.StatusUnprocessableEntity,
			fmt.Sprintf("Bad request - Runner %q is still running a job\"", name), runnerDocs(r))
	default:
		delete(s.runners, rn.ID)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	owner, repo := r.PathValue("owner"), r.PathValue("repo")
	id, err := strconv.ParseInt(r.PathValue("job_id"), 10, 64)
	s.mu.Lock()
	j, ok := s.jobs[jobKey(owner, repo, id)]
	s.mu.Unlock()
	if err != nil || !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsJob)
		return
	}
	base := fmt.Sprintf("https://api.github.com/repos/%s/%s", owner, repo)
	body := map[string]any{
		"id":            j.ID,
		"run_id":        j.RunID,
		"run_url":       fmt.Sprintf("%s/actions/runs/%d", base, j.RunID),
		"node_id":       fmt.Sprintf("CR_fake%d", j.ID),
		"head_branch":   "main",
		"head_sha":      strings.Repeat("0", 40),
		"url":           fmt.Sprintf("%s/actions/jobs/%d", base, j.ID),
		"html_url":      fmt.Sprintf("https://github.com/%s/%s/actions/runs/%d/job/%d", owner, repo, j.RunID, j.ID),
		"status":        j.Status,
		"conclusion":    nil,
		"name":          j.Name,
		"workflow_name": nil,
		"steps":         []any{},
		"labels":        append([]string{}, j.Labels...),
		"run_attempt":   1,
		"check_run_url": fmt.Sprintf("%s/check-runs/%d", base, j.ID),
		"created_at":    j.created.Format(time.RFC3339),
		"started_at":    j.created.Format(time.RFC3339),
		"completed_at":  nil,
	}
	if j.Conclusion != "" {
		body["conclusion"] = j.Conclusion
	}
	if j.Status == "completed" {
		body["completed_at"] = j.updated.Format(time.RFC3339)
	}
	body["runner_id"], body["runner_name"], body["runner_group_id"], body["runner_group_name"] = nil, nil, nil, nil
	if j.RunnerName != "" {
		body["runner_id"], body["runner_name"] = j.RunnerID, j.RunnerName
		body["runner_group_id"], body["runner_group_name"] = defaultRunnerGroupID, "Default"
	}
	writeJSON(w, http.StatusOK, body)
}
