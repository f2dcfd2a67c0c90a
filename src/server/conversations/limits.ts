/**
 * The one size limit of a message to an agent, shared by the API, the team API and the web pages, with
 * the words a person reads when they go over it.
 */
import { z } from 'zod';

export const MESSAGE_LIMIT = 200_000;

/** A message: not blank, at most MESSAGE_LIMIT characters. */
export const messageField = z
  .string({ error: 'prompt is required' })
  .min(1, 'Write a message first.')
  .max(
    MESSAGE_LIMIT,
    `A message is limited to ${MESSAGE_LIMIT.toLocaleString('en-US')} characters; send a long text as a file in the conversation's computer, or in parts.`,
  );
