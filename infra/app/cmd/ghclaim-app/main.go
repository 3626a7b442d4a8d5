// Command ghclaim-app registers ghclaim's GitHub App from a manifest and
// stores its private key and webhook secret in the stack's Secrets Manager
// secrets (`make app`, see infra/app). AWS credentials and region come
// from the SDK's default chain (profiles, SSO, environment).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/infra/app"
	"github.com/ghclaim/ghclaim/shared/awsenv"
)

func main() {
	var c app.Config
	flag.StringVar(&c.Stack, "stack", "ghclaim", "CloudFormation stack whose outputs name the webhook URL and the secrets")
	flag.StringVar(&c.Org, "org", "", "register the App on this organisation (default: your user account)")
	flag.StringVar(&c.Name, "name", "", "the App's name (default ghclaim-<stack>; unique on GitHub, at most 34 characters)")
	flag.StringVar(&c.GitHubURL, "github-url", app.DefaultGitHubURL, "GitHub's web root (GitHub Enterprise Server: https://HOST)")
	flag.StringVar(&c.APIURL, "api-url", app.DefaultAPIURL, "GitHub's REST root (GitHub Enterprise Server: https://HOST/api/v3)")
	flag.StringVar(&c.Addr, "addr", "127.0.0.1:8123", "where the local page listens (127.0.0.1 only)")
	flag.StringVar(&c.WebhookURL, "webhook-url", "", "webhook URL (default: the stack's WebhookUrl output)")
	flag.StringVar(&c.WebhookSecretARN, "webhook-secret-arn", "", "secret for the webhook secret (default: output WebhookSecretArn)")
	flag.StringVar(&c.PrivateKeyARN, "private-key-arn", "", "secret for the private key (default: output GitHubAppPrivateKeyArn)")
	flag.DurationVar(&c.Timeout, "timeout", app.DefaultTimeout, "how long to wait for GitHub's redirect")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ghclaim-app: aws config:", err)
		os.Exit(1)
	}
	// GitHub's conversion answer is the only copy of the App's key: its
	// PutSecretValue must not have its answer cut (see OwnBodies).
	awsCfg.HTTPClient = awsenv.OwnBodies(awsCfg.HTTPClient)
	if _, err := app.Run(ctx, c, cloudformation.NewFromConfig(awsCfg), secretsmanager.NewFromConfig(awsCfg), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ghclaim-app:", err)
		os.Exit(1)
	}
}
