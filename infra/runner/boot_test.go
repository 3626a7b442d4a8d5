// Package runner tests infra/runner/boot.sh, the runner instances' boot
// script, with bash and stubbed curl, aws, iptables, shutdown, sudo, chown
// and sleep on PATH: the order of its steps, that every failure powers off,
// and that the JIT config never reaches the runner's environment or
// command line.
package runner

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stubs are the commands boot.sh calls, each logging one line to $STUB/calls.
// Behaviour is chosen by files in $STUB (never by environment variables
// holding secrets: the runner stub dumps its environment).
var stubs = map[string]string{
	"curl": `url=${@: -1}
echo "curl ${url#http://169.254.169.254/latest/}" >>"$STUB/calls"
case $url in
*/api/token) [[ ! -e $STUB/fail-token ]] || exit 22; echo TOKEN ;;
*/placement/region) echo eu-west-1 ;;
*/tags/instance/ghclaim:runner-name) [[ -e $STUB/name ]] || exit 22; cat "$STUB/name" ;;
*) exit 22 ;;
esac`,
	// delete-parameter answers as the CLI prints SSM's errors: refused for
	// good (deny-delete), throttled the number of times in
	// throttle-delete, or gone already (gone-delete).
	"aws": `echo "aws $1 $2 $6" >>"$STUB/calls"
echo "$*" >>"$STUB/aws.args"
echo "${AWS_RETRY_MODE-} ${AWS_MAX_ATTEMPTS-}" >>"$STUB/aws.env"
case $2 in
get-parameter)
	if [[ ! -e $STUB/jit ]]; then
		echo "An error occurred (ParameterNotFound) when calling the GetParameter operation: " >&2
		exit 254
	fi
	cat "$STUB/jit" ;;
delete-parameter)
	if [[ -e $STUB/lost-delete ]]; then
		# Deleted, its answer lost; the retry meets the role's tag
		# condition on a parameter that is gone: access denied.
		rm -f "$STUB/jit" "$STUB/lost-delete"
		echo "An error occurred (AccessDeniedException) when calling the DeleteParameter operation: User: arn:aws:sts::123456789012:assumed-role/ghclaim-RunnerRole/i-0fresh is not authorized to perform: ssm:DeleteParameter" >&2
		exit 254
	fi
	if [[ -e $STUB/deny-delete ]]; then
		echo "An error occurred (AccessDeniedException) when calling the DeleteParameter operation: User: arn:aws:sts::123456789012:assumed-role/ghclaim-RunnerRole/i-0fresh is not authorized to perform: ssm:DeleteParameter on resource: arn:aws:ssm:eu-west-1:123456789012:parameter/ghclaim/runners/linux-42" >&2
		exit 254
	fi
	if [[ -e $STUB/gone-delete ]]; then
		echo "An error occurred (ParameterNotFound) when calling the DeleteParameter operation: " >&2
		exit 254
	fi
	n=$(cat "$STUB/throttle-delete" 2>/dev/null || echo 0)
	if ((n > 0)); then
		echo $((n - 1)) >"$STUB/throttle-delete"
		echo "An error occurred (ThrottlingException) when calling the DeleteParameter operation (reached max retries: 5): Rate exceeded" >&2
		exit 254
	fi ;;
esac`,
	"iptables": `echo "iptables $*" >>"$STUB/calls"
[[ ! -e $STUB/fail-iptables ]]`,
	"shutdown": `echo "shutdown $*" >>"$STUB/calls"`,
	"chown":    `echo "chown $1" >>"$STUB/calls"`,
	"sudo": `echo "sudo $*" >>"$STUB/calls"
[[ $1 == -u ]] && shift 2
exec "$@"`,
	// The idle timer blocks on the fifo "fire" when it exists, so a test
	// decides when the limit is reached; the parameter polls return at once.
	"sleep": `echo "sleep $1" >>"$STUB/calls"
if [[ $1 == "$GHCLAIM_IDLE_LIMIT" && -p $STUB/fire ]]; then cat "$STUB/fire" >/dev/null; fi`,
}

// runScript is the runner's run.sh: it records its arguments, environment
// and the config files it finds, then does what $STUB/runner-mode says.
const runScript = `#!/bin/bash
echo "run.sh $*" >>"$STUB/calls"
env >"$STUB/runner.env"
printf '%s\n' "$*" >"$STUB/runner.args"
for f in .runner .credentials .credentials_rsaparams; do
	[[ -e $f ]] && echo "$f $(stat -c %a "$f") $(cat "$f")" >>"$STUB/runner.files"
done
case $(cat "$STUB/runner-mode" 2>/dev/null) in
fail) exit 1 ;;
idle) read -r _ <"$STUB/never" ;;
assigned)
	mkdir -p _diag && touch _diag/Worker_20250101-000000-utc.log
	echo go >"$STUB/fire"
	read -r _ <"$STUB/release" ;;
acquired)
	# The Listener has the job (its console line and its log say so) and
	# is renewing the job's lock when the limit is reached: no Worker yet.
	mkdir -p _diag
	echo "[2025-01-01 00:14:59Z INFO Terminal] WRITE LINE: 2025-01-01 00:14:59Z: Running job: build" >_diag/Runner_20250101-000000-utc.log
	echo "2025-01-01 00:14:59Z: Running job: build"
	echo go >"$STUB/fire"
	read -r _ <"$STUB/release"
	touch _diag/Worker_20250101-001500-utc.log ;;
esac
exit 0
`

// runnerFiles is what GitHub's JIT config carries: file name → content.
var runnerFiles = map[string]string{
	".runner":                `{"agentId":7,"agentName":"linux-42","ephemeral":true}`,
	".credentials":           `{"scheme":"OAuthAccessToken","data":{"clientId":"c1"}}`,
	".credentials_rsaparams": `{"d":"secret-rsa-private-exponent"}`,
}

// jitConfig encodes files as GitHub does: base64 of a JSON object of base64 contents.
func jitConfig(t *testing.T, files map[string]string) string {
	t.Helper()
	enc := map[string]string{}
	for k, v := range files {
		enc[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	b, err := json.Marshal(enc)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

type fixture struct {
	stub, dir string
	env       []string
}

func setup(t *testing.T) fixture {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root := t.TempDir()
	f := fixture{stub: filepath.Join(root, "stub"), dir: filepath.Join(root, "actions-runner")}
	bin := filepath.Join(f.stub, "bin")
	for _, d := range []string{bin, f.dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range stubs {
		f.write(t, filepath.Join(bin, name), "#!/bin/bash\n"+body+"\n", 0o755)
	}
	f.write(t, filepath.Join(f.dir, "run.sh"), runScript, 0o755)
	f.write(t, filepath.Join(f.stub, "name"), "linux-42", 0o644)
	f.write(t, filepath.Join(f.stub, "jit"), jitConfig(t, runnerFiles), 0o600)
	f.env = []string{
		"PATH=" + bin + ":/usr/bin:/bin",
		"STUB=" + f.stub,
		"RUNNER_DIR=" + f.dir,
		"RUNNER_USER=runner",
		"GHCLAIM_IDLE_LIMIT=0",
		"GHCLAIM_PARAM_WAIT=15",
	}
	return f
}

func (f fixture) write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func (f fixture) touch(t *testing.T, name string) { f.write(t, filepath.Join(f.stub, name), "", 0o644) }

func (f fixture) fifo(t *testing.T, name string) {
	t.Helper()
	if err := exec.Command("mkfifo", filepath.Join(f.stub, name)).Run(); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
}

// boot runs boot.sh; onLine sees each line of its output as it comes.
func (f fixture) boot(t *testing.T, onLine func(string)) (calls []string, output string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "boot.sh")
	cmd.Env = f.env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if onLine != nil {
			onLine(sc.Text())
		}
	}
	_ = cmd.Wait() // boot.sh's own status does not matter: the machine is off
	if ctx.Err() != nil {
		t.Fatalf("boot.sh did not finish: %s", b.String())
	}
	data, err := os.ReadFile(filepath.Join(f.stub, "calls"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" && !strings.HasPrefix(l, "curl ") && !strings.HasPrefix(l, "chown ") {
			calls = append(calls, l)
		}
	}
	return calls, b.String()
}

const (
	getParam = "aws ssm get-parameter /ghclaim/runners/linux-42"
	delParam = "aws ssm delete-parameter /ghclaim/runners/linux-42"
	firewall = "iptables -w -I OUTPUT -d 169.254.169.254 -m owner --uid-owner runner -j REJECT"
	start    = "sudo -u runner ./run.sh"
	run      = "run.sh "
	poweroff = "shutdown -h now"
)

func TestBootOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	calls, out := f.boot(t, nil)
	want := []string{getParam, delParam, firewall, start, run, poweroff}
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\ngot  %q\nwant %q\noutput:\n%s", calls, want, out)
	}
	jit := jitConfig(t, runnerFiles)
	if strings.Contains(out, jit) || strings.Contains(out, "secret-rsa") {
		t.Errorf("the JIT config reached the output:\n%s", out)
	}
}

// The runner's environment and command line never hold the config or
// anything decoded from it; the runner finds its files, mode 0600.
func TestBootKeepsTheConfigOutOfTheRunnersEnvironment(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.boot(t, nil)
	jit := jitConfig(t, runnerFiles)
	for _, name := range []string{"runner.env", "runner.args"} {
		data, err := os.ReadFile(filepath.Join(f.stub, name))
		if err != nil {
			t.Fatalf("the runner did not run: %v", err)
		}
		for _, secret := range []string{jit, runnerFiles[".credentials_rsaparams"], "JITCONFIG"} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s holds %q:\n%s", name, secret, data)
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(f.stub, "runner.files"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(data)), "\n")
	var want []string
	for _, name := range []string{".runner", ".credentials", ".credentials_rsaparams"} {
		want = append(want, name+" 600 "+runnerFiles[name])
	}
	if !slices.Equal(got, want) {
		t.Errorf("runner files:\ngot  %q\nwant %q", got, want)
	}
}

func TestBootFailuresPowerOff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		arrange func(*testing.T, fixture)
		want    []string
	}{
		{name: "no IMDS token", arrange: func(t *testing.T, f fixture) { f.touch(t, "fail-token") },
			want: []string{poweroff}},

		{name: "no runner name tag", arrange: func(t *testing.T, f fixture) { _ = os.Remove(filepath.Join(f.stub, "name")) },
			want: []string{poweroff}},
		{name: "malformed runner name tag", arrange: func(t *testing.T, f fixture) { f.write(t, filepath.Join(f.stub, "name"), "../etc", 0o644) },
			want: []string{poweroff}},
		// GHCLAIM_PARAM_WAIT=15 s at one poll every 5 s: three reads, then off.
		{name: "parameter never written", arrange: func(t *testing.T, f fixture) { _ = os.Remove(filepath.Join(f.stub, "jit")) },
			want: []string{getParam, "sleep 5", getParam, "sleep 5", getParam, "sleep 5", poweroff}},
		// Refused with the parameter still readable: refused for good.
		{name: "delete refused", arrange: func(t *testing.T, f fixture) { f.touch(t, "deny-delete") },
			want: []string{getParam, delParam, getParam, poweroff}},
		{name: "firewall refused", arrange: func(t *testing.T, f fixture) { f.touch(t, "fail-iptables") },
			want: []string{getParam, delParam, firewall, poweroff}},
		{name: "config holds no runner files", arrange: func(t *testing.T, f fixture) {
			f.write(t, filepath.Join(f.stub, "jit"), base64.StdEncoding.EncodeToString([]byte(`{"../../etc/passwd":"eA=="}`)), 0o600)
		}, want: []string{getParam, delParam, firewall, poweroff}},
		{name: "config not base64", arrange: func(t *testing.T, f fixture) { f.write(t, filepath.Join(f.stub, "jit"), "not*base64", 0o600) },
			want: []string{getParam, delParam, firewall, poweroff}},
		// An entry the parser cannot read leaves a runner file out: the
		// runner would fail at once, so the machine powers off first.
		{name: "config missing a runner file", arrange: func(t *testing.T, f fixture) {
			two := map[string]string{".runner": runnerFiles[".runner"], ".credentials": runnerFiles[".credentials"]}
			f.write(t, filepath.Join(f.stub, "jit"), jitConfig(t, two), 0o600)
		}, want: []string{getParam, delParam, firewall, poweroff}},
		{name: "runner fails", arrange: func(t *testing.T, f fixture) { f.write(t, filepath.Join(f.stub, "runner-mode"), "fail", 0o644) },
			want: []string{getParam, delParam, firewall, start, run, poweroff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			tt.arrange(t, f)
			calls, out := f.boot(t, nil)
			if !slices.Equal(calls, tt.want) {
				t.Errorf("calls:\ngot  %q\nwant %q\noutput:\n%s", calls, tt.want, out)
			}
		})
	}
}

// A pool whose launch template opts in gives its jobs the instance role:
// no firewall rule.
func TestBootOptInKeepsIMDSOpen(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.env = append(f.env, "GHCLAIM_JOBS_USE_INSTANCE_ROLE=true")
	calls, out := f.boot(t, nil)
	want := []string{getParam, delParam, start, run, poweroff}
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\ngot  %q\nwant %q\noutput:\n%s", calls, want, out)
	}
}

func TestBootIdleLimit(t *testing.T) {
	t.Parallel()
	t.Run("no job: the runner is stopped and the machine powers off", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.env = append(f.env, "GHCLAIM_IDLE_LIMIT=900")
		f.write(t, filepath.Join(f.stub, "runner-mode"), "idle", 0o644)
		f.fifo(t, "never") // the idle runner waits on it forever
		calls, out := f.boot(t, nil)
		if !strings.Contains(out, "no job within 900s: stopping the runner") {
			t.Errorf("output: got\n%s\nwant the idle stop", out)
		}
		if len(calls) == 0 || calls[len(calls)-1] != poweroff || !slices.Contains(calls, "sleep 900") {
			t.Errorf("calls: got %q, want the 900 s timer and a power-off last", calls)
		}
	})
	// A job taken in time is left running: with its Worker started, or
	// acquired by the Listener with no Worker yet (the lock renewal before
	// it can take a while), which a stop would cancel for good.
	for _, mode := range []string{"assigned", "acquired"} {
		t.Run("a job taken in time is left running: "+mode, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.env = append(f.env, "GHCLAIM_IDLE_LIMIT=900")
			f.write(t, filepath.Join(f.stub, "runner-mode"), mode, 0o644)
			f.fifo(t, "fire")    // the runner takes a job, then the limit is reached
			f.fifo(t, "release") // the runner finishes once the timer has decided
			calls, out := f.boot(t, func(line string) {
				if strings.Contains(line, "runner took a job") || strings.Contains(line, "stopping the runner") {
					go func() { // opening a fifo blocks until the runner reads it
						if w, err := os.OpenFile(filepath.Join(f.stub, "release"), os.O_WRONLY, 0); err == nil {
							_, _ = w.WriteString("done\n")
							_ = w.Close()
						}
					}()
				}
			})
			if strings.Contains(out, "stopping the runner") || !strings.Contains(out, "runner exited with status 0") {
				t.Errorf("output: got\n%s\nwant the runner to finish its job", out)
			}
			if calls[len(calls)-1] != poweroff {
				t.Errorf("calls: got %q, want a power-off last", calls)
			}
		})
	}
}

// TestBootParameterWaitIsBoundedInTime: the wait for the parameter ends
// GHCLAIM_PARAM_WAIT seconds after it began by the clock, whatever each
// read costs: an SSM that answers each read only after its timeouts (45 s:
// three attempts of 5 + 10 s) was polled 120 times for the default 600 s,
// keeping the machine up for well over an hour. The stubs keep a clock of
// their own (date reads it; each aws read and each sleep moves it).
func TestBootParameterWaitIsBoundedInTime(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_ = os.Remove(filepath.Join(f.stub, "jit"))
	for i, e := range f.env {
		if strings.HasPrefix(e, "GHCLAIM_PARAM_WAIT=") {
			f.env[i] = "GHCLAIM_PARAM_WAIT=600"
		}
	}
	bin := filepath.Join(f.stub, "bin")
	f.write(t, filepath.Join(f.stub, "clock"), "1000", 0o644)
	tick := `c=$(cat "$STUB/clock"); echo $((c + %s)) >"$STUB/clock"`
	f.write(t, filepath.Join(bin, "date"), "#!/bin/bash\ncat \"$STUB/clock\"\n", 0o755)
	f.write(t, filepath.Join(bin, "aws"), "#!/bin/bash\n"+fmt.Sprintf(tick, "45")+"\n"+stubs["aws"]+"\n", 0o755)
	f.write(t, filepath.Join(bin, "sleep"), "#!/bin/bash\n"+fmt.Sprintf(tick, "$1")+"\n"+stubs["sleep"]+"\n", 0o755)
	calls, out := f.boot(t, nil)
	reads := 0
	for _, c := range calls {
		if c == getParam {
			reads++
		}
	}
	b, err := os.ReadFile(filepath.Join(f.stub, "clock"))
	if err != nil {
		t.Fatal(err)
	}
	end, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if waited := end - 1000; waited > 600 || reads != 12 {
		t.Errorf("waited %d s in %d reads, want at most 600 s (12 reads of 45 s and their 5 s polls):\n%s", waited, reads, out)
	}
	if calls[len(calls)-1] != poweroff || !strings.Contains(out, "within 600s") {
		t.Errorf("calls %q: want the wait to end in a power-off", calls)
	}
}

// TestBootBoundsEverySSMCall: each SSM call carries short connect and read
// timeouts. The CLI's own are a minute each, over three attempts: an SSM
// endpoint that silently drops packets stretched every poll of the
// parameter wait to minutes, and the bounded wait to hours.
func TestBootBoundsEverySSMCall(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_ = os.Remove(filepath.Join(f.stub, "jit")) // a few polls, then off
	f.boot(t, nil)
	f2 := setup(t)
	f2.boot(t, nil) // a read and a delete
	for _, fx := range []fixture{f, f2} {
		b, err := os.ReadFile(filepath.Join(fx.stub, "aws.args"))
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if !strings.Contains(call, "--cli-connect-timeout 5") || !strings.Contains(call, "--cli-read-timeout 10") {
				t.Errorf("aws %s: want --cli-connect-timeout 5 --cli-read-timeout 10", call)
			}
		}
	}
}

// TestBootRefusesAFractionalLimit: a fractional idle limit (the template's
// Number parameter takes one) would fail bash's arithmetic, and the idle
// stop with it, silently: the machine powers off before it reads anything.
func TestBootRefusesAFractionalLimit(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"GHCLAIM_IDLE_LIMIT=900.5", "GHCLAIM_PARAM_WAIT=10m", "GHCLAIM_IDLE_LIMIT=0900", "GHCLAIM_PARAM_WAIT=0600"} {
		f := setup(t)
		f.env = append(f.env, v)
		calls, out := f.boot(t, nil)
		if len(calls) != 1 || calls[0] != poweroff || !strings.Contains(out, "not a whole number of seconds") {
			t.Errorf("%s: calls %v, output %q; want a refusal, then power off", v, calls, out)
		}
	}
}

// TestBootWaitsOutAThrottledDelete: Parameter Store's request rate is
// shared by every machine of a burst booting at once. One throttled
// DeleteParameter (past the CLI's own attempts) once powered the machine
// off with its config read: the job waited for the runner-start grace
// and a new attempt. The delete is tried again after a jittered, doubling
// wait; a parameter already gone counts as deleted; a delete throttled
// eight times still powers off (the config must not stay readable while
// a job runs). The CLI runs in adaptive retry mode.
func TestBootWaitsOutAThrottledDelete(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		arrange func(t *testing.T, f fixture)
		deletes int
		started bool
	}{
		{name: "throttled twice", arrange: func(t *testing.T, f fixture) { f.write(t, filepath.Join(f.stub, "throttle-delete"), "2", 0o644) },
			deletes: 3, started: true},
		{name: "gone already", arrange: func(t *testing.T, f fixture) { f.touch(t, "gone-delete") }, deletes: 1, started: true},
		// The delete took effect but its answer was lost; tried again, it
		// is refused (the role's tag condition cannot match a parameter
		// that is gone): a read says it is gone, and the runner starts.
		{name: "deleted, answer lost, retry refused", arrange: func(t *testing.T, f fixture) { f.touch(t, "lost-delete") }, deletes: 1, started: true},
		{name: "throttled for good", arrange: func(t *testing.T, f fixture) { f.write(t, filepath.Join(f.stub, "throttle-delete"), "1000", 0o644) },
			deletes: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			tc.arrange(t, f)
			calls, out := f.boot(t, nil)
			var deletes, sleeps int
			for i, c := range calls {
				if c == delParam {
					deletes++
				}
				if strings.HasPrefix(c, "sleep ") && i > 0 && calls[i-1] == delParam {
					w, err := strconv.Atoi(strings.TrimPrefix(c, "sleep "))
					if err != nil || w < 2 || w > 60 {
						t.Errorf("wait %q after a failed delete, want 2-60 s", c)
					}
					sleeps++
				}
			}
			if deletes != tc.deletes || sleeps != tc.deletes-1 || slices.Contains(calls, start) != tc.started || calls[len(calls)-1] != poweroff {
				t.Fatalf("%d deletes, %d waits, started %v; want %d deletes, %d waits, started %v, then off\ncalls %q\noutput:\n%s",
					deletes, sleeps, slices.Contains(calls, start), tc.deletes, tc.deletes-1, tc.started, calls, out)
			}
			env, err := os.ReadFile(filepath.Join(f.stub, "aws.env"))
			if err != nil || !strings.HasPrefix(string(env), "adaptive 6\n") {
				t.Errorf("the aws CLI ran with AWS_RETRY_MODE/AWS_MAX_ATTEMPTS %q, want adaptive 6", env)
			}
		})
	}
}

// TestRefusedDeleteWhateverTheName: a delete refused while the parameter
// is still readable (an SCP denying ssm:DeleteParameter, say) powers off,
// whatever the runner's name. The CLI's AccessDenied text names the
// resource, and a pool named "ParameterNotFound" (pool names allow it)
// matched the "already gone" pattern: the runner started with its config
// readable. The codes are matched in their parentheses.
func TestRefusedDeleteWhateverTheName(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.write(t, filepath.Join(f.stub, "name"), "ParameterNotFound-42", 0o644)
	f.write(t, filepath.Join(f.stub, "bin", "aws"), `#!/bin/bash
echo "aws $1 $2 $6" >>"$STUB/calls"
case $2 in
get-parameter) cat "$STUB/jit" ;;
delete-parameter)
	echo "An error occurred (AccessDeniedException) when calling the DeleteParameter operation: User: arn:aws:sts::123456789012:assumed-role/ghclaim-RunnerRole/i-0fresh is not authorized to perform: ssm:DeleteParameter on resource: arn:aws:ssm:eu-west-1:123456789012:parameter$6 with an explicit deny in a service control policy" >&2
	exit 254 ;;
esac
`, 0o755)
	calls, out := f.boot(t, nil)
	if slices.Contains(calls, start) || calls[len(calls)-1] != poweroff {
		t.Fatalf("runner started with its config still readable:\ncalls %q\n%s", calls, out)
	}
}
