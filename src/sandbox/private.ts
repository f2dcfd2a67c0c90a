/**
 * Private: a box for adapter secrets (tokens, access keys) carried on handles and commands.
 * It hides its content from util.inspect, JSON.stringify, String() and template literals.
 */
import { inspect } from 'node:util';

const REDACTED = '[private]';

export class Private<T> {
  readonly #value: T;
  constructor(value: T) {
    this.#value = value;
  }
  /** The only way to read the secret; call sites that do should be few and obvious. */
  reveal(): T {
    return this.#value;
  }
  toJSON(): string {
    return REDACTED;
  }
  toString(): string {
    return REDACTED;
  }
  [Symbol.toPrimitive](): string {
    return REDACTED;
  }
  [inspect.custom](): string {
    return REDACTED;
  }
}
