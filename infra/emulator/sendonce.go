package emulator

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// SQSOnce is an SQS client whose SendMessage puts the message on the queue exactly once, for
// a test that counts the messages it receives. The SDK retries a send whose answer was lost
// (a cancelled call, a reset; on a busy box the SDK's own client cut answers too, until
// awsenv.OwnBodies: aws-sdk-go-v2 issues 1825 and 2737), and the retry puts the message twice,
// as SQS may.
// Here each try goes once, and a try whose outcome is unknown is judged by the queue's count
// before the message is sent again. So while SendMessage runs, the caller must be the queue's
// only writer and nothing may receive or delete from it.
type SQSOnce struct{ *sqs.Client }

// count is every message on the queue: visible, in flight and delayed.
func (c SQSOnce) count(ctx context.Context, url *string) (int, error) {
	names := []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}
	out, err := c.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: names})
	if err != nil {
		return 0, fmt.Errorf("count the messages of %s: %w", aws.ToString(url), err)
	}
	n := 0
	for _, name := range names {
		v, err := strconv.Atoi(out.Attributes[string(name)])
		if err != nil {
			return 0, fmt.Errorf("count the messages of %s: %s: %w", aws.ToString(url), name, err)
		}
		n += v
	}
	return n, nil
}

// SendMessage sends in once. On an unknown outcome that the queue's count shows took effect,
// the output is empty (its MessageId was in the lost answer).
func (c SQSOnce) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opt ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	before, err := c.count(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	opt = append(opt[:len(opt):len(opt)], func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	for try := 1; ; try++ {
		out, err := c.Client.SendMessage(ctx, in, opt...)
		var api smithy.APIError
		if err == nil || errors.As(err, &api) || try == 3 || ctx.Err() != nil {
			return out, err
		}
		if n, cerr := c.count(ctx, in.QueueUrl); cerr == nil && n > before {
			return &sqs.SendMessageOutput{}, nil // it took effect; only the answer was lost
		}
	}
}
