package ghfake

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Delivery describes one workflow_job webhook delivery (see WorkflowJobPayload).
type Delivery struct {
	Action  string // "queued", "waiting", "in_progress" or "completed"
	Repo    string // "owner/name"; the owner is an organisation unless UserOwned
	Private bool
	// UserOwned makes the repository's owner a user account: owner.type
	// "User" and no organization object, as GitHub sends it for a
	// repository of a personal account.
	UserOwned bool
	JobID     int64
	RunID     int64
	Labels    []string
	// RunnerName is the runner that took the job (in_progress, completed).
	RunnerName string
	// Conclusion of a completed job (default "success" with a runner,
	// "cancelled" without).
	Conclusion string
	// Installation is the App installation id (0: no installation key).
	Installation int64
	// At is when the job was created (default: a fixed instant).
	At time.Time
}

// WorkflowJobPayload is the body GitHub sends for d, with every field that
// GitHub's webhook description requires (the repository, its owner, the
// organisation when the owner is one, and the sender in full), so the test
// kits that deliver webhooks send what GitHub sends.
func WorkflowJobPayload(d Delivery) []byte {
	owner, name, _ := strings.Cut(d.Repo, "/")
	at := d.At
	if at.IsZero() {
		at = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	}
	ts := at.UTC().Format(time.RFC3339)
	api := "https://api.github.com/repos/" + d.Repo
	var conclusion, completedAt, runnerName, runnerID, groupID, groupName any
	if d.RunnerName != "" {
		runnerName, runnerID, groupID, groupName = d.RunnerName, int64(1), int64(defaultRunnerGroupID), "Default"
	}
	if d.Action == "completed" {
		conclusion, completedAt = d.Conclusion, ts
		if d.Conclusion == "" {
			conclusion = "success"
			if d.RunnerName == "" {
				conclusion = "cancelled"
			}
		}
	}
	visibility := "public"
	if d.Private {
		visibility = "private"
	}
	p := map[string]any{
		"action": d.Action,
		"workflow_job": map[string]any{
			"id": d.JobID, "run_id": d.RunID, "workflow_name": "CI", "head_branch": "main",
			"run_url": fmt.Sprintf("%s/actions/runs/%d", api, d.RunID), "run_attempt": 1,
			"node_id": fmt.Sprintf("CR_fake%d", d.JobID), "head_sha": strings.Repeat("0", 40),
			"url":      fmt.Sprintf("%s/actions/jobs/%d", api, d.JobID),
			"html_url": fmt.Sprintf("https://github.com/%s/actions/runs/%d/job/%d", d.Repo, d.RunID, d.JobID),
			"status":   d.Action, "conclusion": conclusion,
			"created_at": ts, "started_at": ts, "completed_at": completedAt,
			"name": "build", "steps": []any{},
			"check_run_url": fmt.Sprintf("%s/check-runs/%d", api, d.JobID),
			"labels":        append([]string{}, d.Labels...),
			"runner_id":     runnerID, "runner_name": runnerName, "runner_group_id": groupID, "runner_group_name": groupName,
		},
		"repository": repository(d.Repo, name, owner, d.Private, d.UserOwned, visibility, ts),
		"sender":     user("octocat", 583231, "User"),
	}
	if !d.UserOwned {
		p["organization"] = organization(owner)
	}
	if d.Installation != 0 {
		p["installation"] = map[string]any{"id": d.Installation, "node_id": fmt.Sprintf("MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u%d", d.Installation)}
	}
	b, _ := json.Marshal(p) // maps of plain values always marshal
	return b
}

func repository(full, name, owner string, private, userOwned bool, visibility, ts string) map[string]any {
	api := "https://api.github.com/repos/" + full
	ownerType := "Organization"
	if userOwned {
		ownerType = "User"
	}
	r := map[string]any{
		"id": 186853002, "node_id": "MDEwOlJlcG9zaXRvcnkxODY4NTMwMDI=", "name": name, "full_name": full,
		"private": private, "visibility": visibility, "owner": user(owner, 6811672, ownerType),
		"html_url": "https://github.com/" + full, "description": nil, "fork": false, "url": api,
		"created_at": ts, "updated_at": ts, "pushed_at": ts,
		"git_url": "git://github.com/" + full + ".git", "ssh_url": "git@github.com:" + full + ".git",
		"clone_url": "https://github.com/" + full + ".git", "svn_url": "https://github.com/" + full,
		"homepage": nil, "language": "Go", "mirror_url": nil, "license": nil, "default_branch": "main",
		"size": 0, "forks": 0, "forks_count": 0, "open_issues": 0, "open_issues_count": 0,
		"stargazers_count": 0, "watchers": 0, "watchers_count": 0,
		"has_issues": true, "has_projects": true, "has_downloads": true, "has_wiki": true, "has_pages": false,
		"archived": false, "disabled": false, "topics": []string{},
	}
	for k, path := range map[string]string{
		"forks_url": "/forks", "keys_url": "/keys{/key_id}", "collaborators_url": "/collaborators{/collaborator}",
		"teams_url": "/teams", "hooks_url": "/hooks", "issue_events_url": "/issues/events{/number}", "events_url": "/events",
		"assignees_url": "/assignees{/user}", "branches_url": "/branches{/branch}", "tags_url": "/tags",
		"blobs_url": "/git/blobs{/sha}", "git_tags_url": "/git/tags{/sha}", "git_refs_url": "/git/refs{/sha}",
		"trees_url": "/git/trees{/sha}", "statuses_url": "/statuses/{sha}", "languages_url": "/languages",
		"stargazers_url": "/stargazers", "contributors_url": "/contributors", "subscribers_url": "/subscribers",
		"subscription_url": "/subscription", "commits_url": "/commits{/sha}", "git_commits_url": "/git/commits{/sha}",
		"comments_url": "/comments{/number}", "issue_comment_url": "/issues/comments{/number}",
		"contents_url": "/contents/{+path}", "compare_url": "/compare/{base}...{head}", "merges_url": "/merges",
		"archive_url": "/{archive_format}{/ref}", "downloads_url": "/downloads", "issues_url": "/issues{/number}",
		"pulls_url": "/pulls{/number}", "milestones_url": "/milestones{/number}",
		"notifications_url": "/notifications{?since,all,participating}", "labels_url": "/labels{/name}",
		"releases_url": "/releases{/id}", "deployments_url": "/deployments",
	} {
		r[k] = api + path
	}
	return r
}

func user(login string, id int64, typ string) map[string]any {
	api := "https://api.github.com/users/" + login
	return map[string]any{
		"login": login, "id": id, "node_id": fmt.Sprintf("MDQ6VXNlcjU%d", id),
		"avatar_url": fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", id), "gravatar_id": "",
		"url": api, "html_url": "https://github.com/" + login,
		"followers_url": api + "/followers", "following_url": api + "/following{/other_user}",
		"gists_url": api + "/gists{/gist_id}", "starred_url": api + "/starred{/owner}{/repo}",
		"subscriptions_url": api + "/subscriptions", "organizations_url": api + "/orgs", "repos_url": api + "/repos",
		"events_url": api + "/events{/privacy}", "received_events_url": api + "/received_events",
		"type": typ, "site_admin": false,
	}
}

func organization(login string) map[string]any {
	api := "https://api.github.com/orgs/" + login
	return map[string]any{
		"login": login, "id": 6811672, "node_id": "MDEyOk9yZ2FuaXphdGlvbjY4MTE2NzI=", "url": api,
		"repos_url": api + "/repos", "events_url": api + "/events", "hooks_url": api + "/hooks",
		"issues_url": api + "/issues", "members_url": api + "/members{/member}",
		"public_members_url": api + "/public_members{/member}",
		"avatar_url":         "https://avatars.githubusercontent.com/u/6811672?v=4", "description": nil,
	}
}
