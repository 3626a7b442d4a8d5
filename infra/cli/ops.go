package cli

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/redact"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/store"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

func redriveFlags(fs *flag.FlagSet, o *opts) {
	fs.IntVar(&o.max, "max", 0, "move at most this many messages (0: at most what the DLQ held at the start)")
	o.visibility = time.Minute
	fs.Var((*duration)(&o.visibility), "visibility", "how long a received DLQ message stays hidden should the run die: a `duration` of whole seconds, 1s to 12h (what a run leaves shows again when it ends)")
}

// redriveReport counts what redrive did.
type redriveReport struct {
	Moved       int `json:"moved"`
	Undecodable int `json:"undecodable"`
	SendFailed  int `json:"send_failed"`
	// NotDeleted: sent, but the DLQ copy could not be deleted (it comes back;
	// its second copy is a duplicate the version drops).
	NotDeleted int `json:"not_deleted"`
}

func (c *CLI) redrive(ctx context.Context, o *opts, _ []string) error {
	if o.max < 0 {
		return usagef("invalid value %d for flag --max: must not be negative", o.max)
	}
	if o.visibility < time.Second || o.visibility > sqsMaxVisibility || o.visibility%time.Second != 0 {
		return usagef("invalid value %s for flag --visibility: whole seconds from 1s to %s (SQS's visibility timeout)", o.visibility, sqsMaxVisibility)
	}
	if err := c.resolve(ctx, o); err != nil {
		return err
	}
	if err := need("dlq-url", o.dep.DLQURL, "queue-url", o.dep.QueueURL); err != nil {
		return err
	}
	if o.dep.DLQURL == o.dep.QueueURL {
		return usagef("flags --dlq-url and --queue-url name the same queue (%s): each copy would be received again, for ever", o.dep.DLQURL)
	}
	if err := c.checkDLQ(ctx, o.dep.QueueURL, o.dep.DLQURL); err != nil {
		return err
	}
	claims := queue.New(c.cfg.SQS, o.dep.QueueURL)
	var rep redriveReport
	// What the run leaves in the DLQ (undecodable, failed sends, sent but
	// not deleted) stays hidden until the run ends, then is made visible
	// again for the next run. Received again meanwhile, it would crowd out
	// the messages not yet seen; hidden, it lets the run end at the first
	// empty long poll, which then means that no message is left to look at.
	h := &holder{c: c, url: o.dep.DLQURL, hide: max(o.visibility, redriveHold), left: map[string]*leftMessage{}}
	defer h.release(context.WithoutCancel(ctx))
	moved := map[string]bool{}      // moved and deleted; a copy SQS hands out again is deleted, not sent twice
	stale, hidingFailed := 0, false // receives in a row that brought back only messages this run left
	limit := o.max
	if limit == 0 {
		// A run takes at most what the DLQ held at its start: a claimer
		// that keeps dead-lettering (a throttled table, a permission
		// gone) refills it as fast as it empties, and the run went on
		// for ever, feeding claims back to the broken claimer.
		if n, err := c.queueDepth(ctx, o.dep.DLQURL); err == nil && n > 0 {
			limit = n
		}
	}
	// Paced: the copies reach the claims queue at most two a second
	// (DESIGN.md's herd bound is three), not all at once after an outage.
	pace := &pacer{now: c.cfg.Now, sleep: c.cfg.Sleep, rnd: c.cfg.Rand}
	if limit > 1 {
		c.progress("moving up to %d message(s), about %s apart: about %s", limit, redriveGap+redriveJitter/2,
			(time.Duration(limit-1) * (redriveGap + redriveJitter/2)).Round(time.Second))
	}
	var interrupted, receiveErr error
	empty := 0 // empty long polls in a row
	for limit == 0 || rep.Moved+rep.SendFailed+rep.Undecodable < limit {
		h.keep(ctx)
		// No more than the pace sends before the visibility ends: a
		// received copy is sent while it is still hidden.
		n := int32(max(1, min(10, int(o.visibility/(redriveGap+redriveJitter))+1)))
		if limit > 0 {
			n = min(n, int32(limit-rep.Moved-rep.SendFailed-rep.Undecodable))
		}
		// The batch's first copy is sent as soon as it is received.
		if err := pace.wait(ctx, func() { h.keep(ctx) }); err != nil {
			interrupted = err
			break
		}
		// A long poll: a short one may answer empty, or with a few, while
		// messages remain; an empty long poll means the DLQ has none left
		// to show.
		out, err := c.cfg.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(o.dep.DLQURL), MaxNumberOfMessages: n, WaitTimeSeconds: redriveWait,
			VisibilityTimeout: int32(o.visibility / time.Second),
		})
		if err != nil {
			// Stopped here, the run still reports what it did (a
			// script reading --json gets its counts) and shows what it
			// left.
			if interrupted = ctx.Err(); interrupted == nil {
				receiveErr = err
			}
			break
		}
		if len(out.Messages) == 0 {
			// An empty long poll may be a slow answer, not an empty
			// queue: the run ends at redriveEmpty of them in a row.
			if empty++; empty >= redriveEmpty {
				break
			}
			continue
		}
		empty = 0
		fresh, back := false, false // a message not seen before; one this run left
		for i, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			if moved[id] {
				_ = c.deleteFromDLQ(ctx, o.dep.DLQURL, m.ReceiptHandle)
				continue
			}
			if l := h.left[id]; l != nil {
				// Left by this run and back (its hiding failed): counted
				// already. A moved one is deleted now if it can be.
				back = true
				l.handle = m.ReceiptHandle
				if l.sent && c.deleteFromDLQ(ctx, o.dep.DLQURL, m.ReceiptHandle) == nil {
					delete(h.left, id)
					moved[id] = true
					rep.NotDeleted--
					continue
				}
				h.hold(ctx, id, l)
				continue
			}
			fresh = true
			msg, err := job.DecodeMessage(aws.ToString(m.Body))
			if err != nil {
				rep.Undecodable++
				c.progress("message %s is not a claim message (%v): left in the DLQ", id, err)
				h.hold(ctx, id, &leftMessage{handle: m.ReceiptHandle})
				continue
			}
			if err := pace.wait(ctx, func() { h.keep(ctx) }); err != nil {
				// Stopped: this message and the rest of the batch are
				// still in the DLQ, and shown again when the run ends
				// (not after --visibility: a run started at once would
				// find none of them, and end as if the DLQ were empty).
				interrupted = err
				for _, m := range out.Messages[i:] {
					id := aws.ToString(m.MessageId)
					switch l := h.left[id]; {
					case moved[id]:
					case l == nil:
						h.left[id] = &leftMessage{handle: m.ReceiptHandle}
					default:
						// Left earlier and back in this batch: only its
						// latest receipt handle reaches it (SQS).
						l.handle = m.ReceiptHandle
					}
				}
				break
			}
			err = claims.Send(ctx, msg, 0)
			pace.sent()
			if err != nil {
				rep.SendFailed++
				c.progress("job %d: send to the claims queue failed (%v): left in the DLQ", msg.JobID, err)
				h.hold(ctx, id, &leftMessage{handle: m.ReceiptHandle})
				continue
			}
			if err := c.deleteFromDLQ(ctx, o.dep.DLQURL, m.ReceiptHandle); err != nil {
				rep.NotDeleted++
				c.progress("job %d: sent, but not deleted from the DLQ (%v)", msg.JobID, err)
				h.hold(ctx, id, &leftMessage{handle: m.ReceiptHandle, sent: true})
			} else {
				moved[id] = true
			}
			rep.Moved++
		}
		if interrupted != nil {
			break
		}
		switch {
		case fresh:
			stale = 0
		case back:
			stale++
		}
		if stale >= redriveStale {
			// Only what this run left keeps showing: hiding it fails, so
			// an empty poll may never come, and messages behind it may
			// not show. Stop rather than loop.
			hidingFailed = true
			break
		}
		c.progress("%d moved so far…", rep.Moved)
	}
	// Moved messages whose delete failed: once more before they are let go.
	for id, l := range h.left {
		if l.sent && c.deleteFromDLQ(ctx, o.dep.DLQURL, l.handle) == nil {
			delete(h.left, id)
			rep.NotDeleted--
		}
	}
	if o.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.cfg.Stdout, "moved %d message(s) to the claims queue; %d undecodable and %d failed sends left in the DLQ\n",
			rep.Moved, rep.Undecodable, rep.SendFailed)
		if rep.NotDeleted > 0 {
			fmt.Fprintf(c.cfg.Stdout, "%d of the moved could not be deleted from the DLQ: they come back there, and their claim copies are duplicates the version drops\n", rep.NotDeleted)
		}
	}
	if interrupted != nil {
		return fmt.Errorf("redrive interrupted: %w (moved %d; the messages not moved stay in the DLQ)", interrupted, rep.Moved)
	}
	if receiveErr != nil {
		return fmt.Errorf("redrive stopped: receive from the DLQ: %w (moved %d; the messages not moved stay in the DLQ)", receiveErr, rep.Moved)
	}
	if hidingFailed {
		return failf("redrive stopped: the messages it left in the DLQ kept showing again (%d failed renewals of their visibility timeout; may the caller use sqs:ChangeMessageVisibility?), so messages behind them may remain; run it again", h.failed)
	}
	if rep.SendFailed > 0 || rep.Undecodable > 0 || rep.NotDeleted > 0 {
		// Moved but not deleted counts too: each comes back to the DLQ,
		// and a script taking exit 0 for done would leave it there.
		why := ""
		if rep.NotDeleted > 0 {
			why = fmt.Sprintf(" (%d moved but not deleted: may the caller use sqs:DeleteMessage on the DLQ?)", rep.NotDeleted)
		}
		if h.failed > 0 {
			why += fmt.Sprintf(" (%d failed hidings of what it left: may the caller use sqs:ChangeMessageVisibility?)", h.failed)
		}
		return failf("redrive left %d message(s) in the DLQ%s", rep.SendFailed+rep.Undecodable+rep.NotDeleted, why)
	}
	return nil
}

// Redrive's pace: each send after the first starts redriveGap plus up to
// redriveJitter at random after the previous send's answer. SQS stamps a
// message between its call's start and its answer, so two copies arrive
// at least redriveGap apart: no 1 s window holds more than two of them,
// within DESIGN.md's herd bound of three. A single message goes at once.
const (
	redriveGap    = 500 * time.Millisecond
	redriveJitter = time.Second
)

// pacer spaces redrive's sends.
type pacer struct {
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
	rnd   random.Source
	next  time.Time // when the next send may start; zero before the first
}

// wait returns when the next send may start; keep runs before a wait.
// Waiting again before that send waits no longer. A cancelled ctx stops
// the run even when no wait is owed: the caller names what it did not try.
func (p *pacer) wait(ctx context.Context, keep func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := p.next.Sub(p.now())
	if p.next.IsZero() || d <= 0 {
		return nil
	}
	keep()
	return p.sleep(ctx, d)
}

// sent notes a send's answer, whatever it was (a failed send may have
// reached SQS), and places the next send a jittered gap after it.
func (p *pacer) sent() {
	p.next = p.now().Add(redriveGap + time.Duration(p.rnd.Float64()*float64(redriveJitter)))
}

// redriveEmpty is how many empty long polls in a row end a redrive: one
// came back empty with three messages in the DLQ while the emulator was
// busy, and the run ended having moved none.
const redriveEmpty = 2

// redriveWait is redrive's long poll, in seconds.
const redriveWait = 1

// redriveHold is the least time a message redrive leaves in the DLQ is
// hidden for at a time: several long polls, so that keep renews it before
// it shows again, whatever --visibility is.
const redriveHold = 10 * time.Second

// redriveStale is how many receives in a row bringing only messages the
// run has seen already end it: their hiding fails.
const redriveStale = 3

// sqsMaxVisibility is SQS's longest visibility timeout (12 hours).
const sqsMaxVisibility = 12 * time.Hour

// checkDLQ refuses a pair of queues where dlqURL is not the dead-letter
// queue of claimsURL (its RedrivePolicy's target): swapped flags, or a
// pasted URL of another queue, would drain live claim messages out of the
// claims queue, or some other queue's messages into it.
func (c *CLI) checkDLQ(ctx context.Context, claimsURL, dlqURL string) error {
	attr := func(url string, name sqstypes.QueueAttributeName) (string, error) {
		out, err := c.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{name}})
		if err != nil {
			return "", fmt.Errorf("queue %s: %w", url, err)
		}
		return out.Attributes[string(name)], nil
	}
	policy, err := attr(claimsURL, sqstypes.QueueAttributeNameRedrivePolicy)
	if err != nil {
		return err
	}
	var p struct {
		Target string `json:"deadLetterTargetArn"`
	}
	if policy == "" || json.Unmarshal([]byte(policy), &p) != nil || p.Target == "" {
		return usagef("--queue-url %s has no dead-letter queue (no RedrivePolicy): it is not the claims queue (were --queue-url and --dlq-url swapped?)", claimsURL)
	}
	arn, err := attr(dlqURL, sqstypes.QueueAttributeNameQueueArn)
	if err != nil {
		return err
	}
	if arn != p.Target {
		return usagef("--dlq-url %s (%s) is not the dead-letter queue of --queue-url %s, which is %s: redrive moves only the claims queue's own dead letters back to it", dlqURL, arn, claimsURL, p.Target)
	}
	return nil
}

func (c *CLI) deleteFromDLQ(ctx context.Context, url string, handle *string) error {
	_, err := c.cfg.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: handle})
	return err
}

// leftMessage is a DLQ message redrive leaves there: its latest receipt
// handle, whether its copy was sent (only its delete failed), and when
// its hiding was last renewed (the real time: SQS's timer runs on it).
type leftMessage struct {
	handle  *string
	sent    bool
	renewed time.Time
}

// holder keeps the messages a redrive leaves hidden until it ends.
type holder struct {
	c      *CLI
	url    string
	hide   time.Duration
	left   map[string]*leftMessage
	failed int // renewals SQS refused
}

// hold records l (message id) as left and hides it for h.hide from now.
func (h *holder) hold(ctx context.Context, id string, l *leftMessage) {
	h.left[id] = l
	h.renew(ctx, l)
}

// keep renews the hiding of every left message a third of h.hide or more
// after its last renewal, long before it would show again. A renewal
// that fails only lets the message show; redrive counts it once anyway.
func (h *holder) keep(ctx context.Context) {
	for _, l := range h.left {
		if time.Since(l.renewed) >= h.hide/3 {
			h.renew(ctx, l)
		}
	}
}

func (h *holder) renew(ctx context.Context, l *leftMessage) {
	l.renewed = time.Now()
	if _, err := h.c.cfg.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(h.url),
		ReceiptHandle: l.handle, VisibilityTimeout: int32(h.hide / time.Second)}); err != nil {
		h.failed++
	}
}

// release makes the left messages visible again at once, for the next
// redrive. One whose release fails shows again after its hiding ends.
func (h *holder) release(ctx context.Context) {
	for _, l := range h.left {
		_, _ = h.c.cfg.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(h.url), ReceiptHandle: l.handle, VisibilityTimeout: 0})
	}
}

// rateView is one installation's reading as printed.
type rateView struct {
	InstallationID int64  `json:"installation_id"`
	Limit          int    `json:"limit"`
	Remaining      int    `json:"remaining"`
	ResetAt        string `json:"reset_at"`
	ObservedAt     string `json:"observed_at"`
	AgeSeconds     int64  `json:"age_seconds"`
	// BlockedUntil is a secondary rate limit's end, while it blocks.
	BlockedUntil string `json:"blocked_until,omitempty"`
	// Status is "blocked" (a secondary limit: the claimers defer),
	// "exhausted" (the claimers defer), "stale" (older than
	// ratelimit.Freshness, or no reading: it says little about now) or "ok".
	Status string `json:"status"`
}

func (c *CLI) rate(ctx context.Context, o *opts, _ []string) error {
	if err := c.resolve(ctx, o); err != nil {
		return err
	}
	if err := need("table", o.dep.Table); err != nil {
		return err
	}
	rates, err := store.NewInventory(store.InventoryConfig{DB: c.cfg.DynamoDB, Table: o.dep.Table}).Rates(ctx)
	if err != nil {
		return fmt.Errorf("table %s: %w", o.dep.Table, err)
	}
	now := c.cfg.Now()
	out := []rateView{}
	for _, id := range slices.Sorted(maps.Keys(rates)) {
		r := rates[id]
		st := "ok"
		switch {
		case r.Blocked(now):
			st = "blocked"
		case r.Exhausted(now):
			st = "exhausted"
		case !r.Known() || now.Sub(r.ObservedAt) >= ratelimit.Freshness:
			st = "stale"
		}
		v := rateView{InstallationID: id, Limit: r.Limit, Remaining: r.Remaining, Status: st}
		if r.Known() {
			v.ResetAt, v.ObservedAt = r.ResetAt.UTC().Format(time.RFC3339), r.ObservedAt.UTC().Format(time.RFC3339)
			v.AgeSeconds = int64(now.Sub(r.ObservedAt) / time.Second)
		}
		if r.Blocked(now) {
			v.BlockedUntil = r.BlockedUntil.UTC().Format(time.RFC3339)
		}
		out = append(out, v)
	}
	if o.json {
		return c.printJSON(out)
	}
	w := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "INSTALLATION\tLIMIT\tREMAINING\tRESET IN\tREADING AGE\tSTATUS")
	for _, v := range out {
		r := rates[v.InstallationID]
		reset, age, status := "-", "-", v.Status
		if r.Known() {
			reset, age = r.ResetAt.Sub(now).Truncate(time.Second).String(), now.Sub(r.ObservedAt).Truncate(time.Second).String()
		}
		if r.Blocked(now) {
			status += " for " + r.BlockedUntil.Sub(now).Truncate(time.Second).String()
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%s\t%s\n", v.InstallationID, v.Limit, v.Remaining, reset, age, status)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(out) == 0 {
		fmt.Fprintln(c.cfg.Stdout, "no rate readings yet (no claimer has called GitHub)")
	}
	return nil
}

// check is one doctor finding.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, fail, skip
	Detail string `json:"detail"`
}

// queueDepth is how many messages url holds, visible or in flight.
func (c *CLI) queueDepth(ctx context.Context, url string) (int, error) {
	out, err := c.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, fmt.Errorf("queue %s: %w", url, err)
	}
	n := 0
	for _, a := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		v, err := strconv.Atoi(out.Attributes[string(a)])
		if err != nil {
			return 0, fmt.Errorf("queue %s: attribute %s %q is not a count", url, a, out.Attributes[string(a)])
		}
		n += v
	}
	return n, nil
}

func (c *CLI) doctor(ctx context.Context, o *opts, _ []string) error {
	if err := c.resolve(ctx, o); err != nil {
		return err
	}
	d := o.dep
	var checks []check
	// A detail may quote an error from GitHub or AWS, whose message can
	// echo the credential that signed the request: it is redacted.
	add := func(name, status, format string, a ...any) {
		checks = append(checks, check{Name: name, Status: status, Detail: redact.String(fmt.Sprintf(format, a...))})
	}

	// Secrets: set, never shown.
	var hookSecrets []string
	if d.WebhookSecretARN == "" {
		add("webhook secret", "fail", "no secret ARN (--webhook-secret-arn or --stack)")
	} else if v, err := secret.Resolve(ctx, c.cfg.SecretsManager, d.WebhookSecretARN, ""); err != nil {
		add("webhook secret", "fail", "%v", err)
	} else {
		hookSecrets = secret.Split(v)
		if len(hookSecrets) == 0 {
			// Only separators (what is left of "new,old" with both
			// deleted): the webhook answers every delivery 503.
			add("webhook secret", "fail", "holds no value (only commas or spaces): the webhook answers every delivery 503")
		} else if len(hookSecrets) == 1 {
			add("webhook secret", "ok", "set (1 value)")
		} else {
			// A rotation, or one secret with a comma in it, which no
			// delivery can match (GitHub signs with the whole): doctor
			// cannot tell them apart, so it says how the value is read.
			add("webhook secret", "ok", "set (%d values, a rotation list: each comma separates two, so a secret with a comma in it never verifies; GitHub must sign with one of them)", len(hookSecrets))
		}
	}
	var app *ghapp.Client
	keyOK := false
	if d.AppKeyARN == "" {
		add("app private key", "fail", "no secret ARN (--app-key-arn or --stack)")
	} else if v, err := secret.Resolve(ctx, c.cfg.SecretsManager, d.AppKeyARN, ""); err != nil {
		add("app private key", "fail", "%v", err)
	} else if _, err := ghapp.New(ghapp.Config{AppID: 1, PrivateKey: []byte(v)}); err != nil {
		add("app private key", "fail", "secret %s is set but is no usable key: %v", d.AppKeyARN, strings.TrimPrefix(err.Error(), "ghapp: private key: "))
	} else {
		keyOK = true
		add("app private key", "ok", "set, an RSA private key (PEM)")
	}

	// The App: reachable with this id and key, and installed.
	switch {
	case !keyOK:
		add("github app", "skip", "needs the private key")
	case d.AppID == 0:
		add("github app", "fail", "no App id (--app-id or the stack's GitHubAppId)")
	default:
		var err error
		app, err = c.githubApp(ctx, d)
		if err != nil {
			add("github app", "fail", "%v", err)
			break
		}
		a, err := app.App(ctx)
		if err != nil {
			add("github app", "fail", "%v%s", err, clockHint(err))
			app = nil
			break
		}
		add("github app", "ok", "%s (id %d) at %s", a.Slug, a.ID, apiOrDefault(d.GitHubAPI))
	}
	if app == nil {
		add("app installations", "skip", "needs the App")
	} else if ins, err := app.Installations(ctx); err != nil {
		add("app installations", "fail", "%v", err)
	} else if len(ins) == 0 {
		add("app installations", "fail", "the App is not installed on any account: install it where the jobs run")
	} else {
		// An installation without a permission its pools' calls need
		// (an App made by hand without it, or changed after it was
		// installed and not yet accepted) passes every other check and
		// then fails each of those jobs non_retryable with GitHub's 403.
		// A suspended one is listed like any other, yet GitHub refuses its
		// token exchange (403): each of its jobs is retried as the App's
		// fault until MAX_AGE, then abandoned.
		scopes := c.poolScopes(d)
		var names, suspended, gaps []string
		for _, in := range ins {
			names = append(names, fmt.Sprintf("%s (%d)", in.Owner, in.ID))
			if !in.SuspendedAt.IsZero() {
				suspended = append(suspended, fmt.Sprintf("%s (%d) since %s by %s", in.Owner, in.ID,
					in.SuspendedAt.UTC().Format(time.RFC3339), cmp.Or(in.SuspendedBy, "an unknown user")))
			}
			if gap := installationGap(in, scopes); len(gap) > 0 {
				gaps = append(gaps, fmt.Sprintf("%s (%d) lacks %s", in.Owner, in.ID, strings.Join(gap, ", ")))
			}
		}
		var faults []string
		if len(suspended) > 0 {
			faults = append(faults, fmt.Sprintf("suspended: %s: GitHub refuses its tokens (403), so none of its jobs is claimed "+
				"(each is retried until MAX_AGE, then abandoned); unsuspend it where it was suspended: the account's owner in the "+
				"account's settings (GitHub Apps, Configure, Unsuspend), the App's owner with DELETE /app/installations/{id}/suspended",
				strings.Join(suspended, "; ")))
		}
		if len(gaps) > 0 {
			faults = append(faults, fmt.Sprintf("%s: its jobs fail with GitHub's 403 \"Resource not accessible by integration\"; "+
				"give the App these in its settings (Permissions & events), then accept them in the installation's settings", strings.Join(gaps, "; ")))
		}
		if len(faults) > 0 {
			add("app installations", "fail", "%s", strings.Join(faults, "; "))
		} else {
			add("app installations", "ok", "%s", strings.Join(names, ", "))
		}
	}

	// Launch templates of the ec2 pools.
	pools, err := c.pools(d)
	switch {
	case err != nil:
		add("launch templates", "fail", "%v", err)
	case len(pools) == 0:
		add("launch templates", "skip", "no ec2 pools (--pools, or the stack's RunnerPools)")
	default:
		for _, p := range pools {
			name := "launch template of pool " + p.Name
			lt := p.Provisioner.LaunchTemplate
			in := &ec2api.DescribeLaunchTemplatesInput{}
			if strings.HasPrefix(lt, "lt-") {
				in.LaunchTemplateIDs = []string{lt}
			} else {
				in.LaunchTemplateNames = []string{lt}
			}
			out, err := c.cfg.EC2.DescribeLaunchTemplates(ctx, in)
			switch {
			case err != nil:
				add(name, "fail", "%s: %v", lt, err)
			case len(out.LaunchTemplates) == 0:
				add(name, "fail", "%s: not found", lt)
			default:
				// What the claimer checks before each launch (provision:
				// TemplateProblems): a template made for the release at
				// 674a79e fails every job of the pool.
				version := cmp.Or(p.Provisioner.LaunchTemplateVersion, "$Default")
				vs, err := c.cfg.EC2.DescribeLaunchTemplateVersions(ctx, &ec2api.DescribeLaunchTemplateVersionsInput{
					LaunchTemplateID: out.LaunchTemplates[0].LaunchTemplateID, Versions: []string{version}})
				switch {
				case err != nil:
					add(name, "fail", "%s version %s: %v", lt, version, err)
				case len(vs.Versions) != 1:
					add(name, "fail", "%s version %s: not found", lt, version)
				default:
					if bad := provision.TemplateProblems(vs.Versions[0].Data); len(bad) > 0 {
						add(name, "fail", "%s version %s: %s; its pool's jobs fail until it is fixed", lt, version, strings.Join(bad, "; "))
					} else {
						add(name, "ok", "%s (%s) version %s", lt, out.LaunchTemplates[0].LaunchTemplateName, version)
					}
				}
			}
		}
	}

	// The webhook answers a signed ping.
	switch {
	case d.WebhookURL == "":
		add("webhook ping", "skip", "no webhook URL (--webhook-url or the stack's WebhookUrl)")
	case len(hookSecrets) == 0:
		add("webhook ping", "skip", "needs the webhook secret")
	default:
		status, err := c.ping(ctx, d.WebhookURL, hookSecrets[0])
		switch {
		case err != nil:
			add("webhook ping", "fail", "%v", err)
		case status != http.StatusOK:
			add("webhook ping", "fail", "%s answered %d to a signed ping, want 200 (a 401 means the secrets differ)", d.WebhookURL, status)
		default:
			add("webhook ping", "ok", "%s answered 200 to a ping signed with the secret's first value", d.WebhookURL)
		}
	}

	// The table and the claims queue answer: a wrong name or URL, or a
	// missing permission, stops every delivery and every claim. One read
	// of an item no installation has (rate#0) and one queue's counts.
	if d.Table == "" {
		add("table", "skip", "no table (--table or --stack)")
	} else if _, err := c.store(d).LoadRate(ctx, 0); err != nil && !errors.Is(err, ratelimit.ErrNoReading) {
		add("table", "fail", "%s: %v", d.Table, err)
	} else {
		add("table", "ok", "%s answers", d.Table)
	}
	if d.QueueURL == "" {
		add("claims queue", "skip", "no queue URL (--queue-url or --stack)")
	} else if n, err := c.queueDepth(ctx, d.QueueURL); err != nil {
		add("claims queue", "fail", "%v", err)
	} else {
		add("claims queue", "ok", "%d message(s) waiting or in flight", n)
	}

	// The dead-letter queue is empty: each message in it is a claim the
	// claimer could not handle (its job waits for the reclaimer's sweep)
	// or a poison message.
	if d.DLQURL == "" {
		add("dead-letter queue", "skip", "no queue URL (--dlq-url or the stack's DeadLetterQueueUrl)")
	} else if n, err := c.queueDepth(ctx, d.DLQURL); err != nil {
		add("dead-letter queue", "fail", "%v", err)
	} else if n > 0 {
		add("dead-letter queue", "fail", "%d message(s): look with ghclaim jobs, move them back with ghclaim redrive", n)
	} else {
		add("dead-letter queue", "ok", "empty")
	}

	failed := 0
	for _, ch := range checks {
		if ch.Status == "fail" {
			failed++
		}
	}
	if o.json {
		if err := c.printJSON(struct {
			OK     bool    `json:"ok"`
			Checks []check `json:"checks"`
		}{failed == 0, checks}); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
		for _, ch := range checks {
			fmt.Fprintf(w, "%s\t%s\t%s\n", strings.ToUpper(ch.Status), ch.Name, ch.Detail)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if failed > 0 {
		return failf("doctor: %d check(s) failed", failed)
	}
	return nil
}

func apiOrDefault(u string) string {
	if u == "" {
		return ghapp.DefaultBaseURL
	}
	return u
}

// installationGap is what in lacks for pools of scopes: "name:level" of
// each permission (ghapp.Needs; org scope only on an organisation, the
// only account with org runners) and the workflow_job event.
func installationGap(in ghapp.Installation, scopes []string) []string {
	var own []string
	for _, s := range scopes {
		if s != pool.ScopeOrg || in.Org {
			own = append(own, s)
		}
	}
	gap := ghapp.Lacks(in.Permissions, ghapp.Needs(own...))
	if !slices.Contains(in.Events, ghapp.EventWorkflowJob) {
		gap = append(gap, "the "+ghapp.EventWorkflowJob+" event")
	}
	return gap
}

// poolScopes returns the scopes of every pool (not only ec2 ones), or
// both scopes when the pools are not known here.
func (c *CLI) poolScopes(d deployment) []string {
	all, err := c.allPools(d)
	if err != nil || len(all) == 0 {
		return []string{pool.ScopeRepo, pool.ScopeOrg}
	}
	var out []string
	for _, p := range all {
		s := cmp.Or(p.Scope, pool.ScopeRepo)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// pools returns the ec2 pools doctor checks: --pools or the stack's
// RunnerPools, else the runner scaffold's two pools. A stack whose pools
// are in an SSM parameter (RunnerPoolsParameter) needs --pools: the
// functions read that parameter, and checking RunnerPools or the scaffold
// instead would pass on the wrong templates.
func (c *CLI) pools(d deployment) ([]pool.Pool, error) {
	all, err := c.allPools(d)
	if err != nil {
		return nil, err
	}
	var ec2Pools []pool.Pool
	for _, p := range all {
		if p.Provisioner.Type == pool.ProvisionerEC2 {
			ec2Pools = append(ec2Pools, p)
		}
	}
	return ec2Pools, nil
}

// allPools returns every pool of the deployment, as pools finds them.
func (c *CLI) allPools(d deployment) ([]pool.Pool, error) {
	var all []pool.Pool
	switch {
	case d.Pools == "" && d.PoolsParameter != "":
		return nil, fmt.Errorf("the stack's pools are in the SSM parameter %s (RunnerPoolsParameter): pass its value with --pools", d.PoolsParameter)
	case d.Pools != "":
		ps, err := pool.Parse(d.Pools)
		if err != nil {
			return nil, fmt.Errorf("RUNNER_POOLS: %w", err)
		}
		all = ps
	default:
		for name, lt := range map[string]string{"linux-x64": d.scaffoldX64, "linux-arm64": d.scaffoldArm64} {
			if lt != "" {
				all = append(all, pool.Pool{Name: name, Provisioner: pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: lt}})
			}
		}
		slices.SortFunc(all, func(a, b pool.Pool) int { return strings.Compare(a.Name, b.Name) })
	}
	return all, nil
}

// ping posts a ping event signed with secret, as GitHub does when a hook
// is created, and returns the status.
func (c *CLI) ping(ctx context.Context, url, secret string) (int, error) {
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1,"hook":{"type":"App","id":1,"events":["workflow_job"]}}`)
	var guid [16]byte
	_, _ = rand.Read(guid[:])
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("webhook URL %q: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/ghclaim-doctor")
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-GitHub-Delivery", hex.EncodeToString(guid[:]))
	req.Header.Set("X-Hub-Signature-256", webhook.SignatureValue(body, []byte(secret)))
	resp, err := (&http.Client{Transport: c.cfg.HTTP}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("post a ping to %s: %w", url, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// clockHint is a hint for an App check GitHub refused over its JWT's times
// ('iat', 'exp'): the JWT is dated by this machine's clock, so a laptop a
// minute or more off GitHub's fails the check with a key that is right,
// and the operator would otherwise suspect the key.
func clockHint(err error) string {
	if s := err.Error(); strings.Contains(s, "('iat')") || strings.Contains(s, "('exp')") {
		return " (the App's JWT is dated by this machine's clock: check that it is right before suspecting the key)"
	}
	return ""
}
