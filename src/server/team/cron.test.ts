import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { next, parseCron, type Cron } from './cron.ts';

const cron = (expr: string): Cron => {
  const r = parseCron(expr);
  assert.ok(r.ok, r.ok ? '' : r.error);
  return r.value;
};
const at = (iso: string) => new Date(iso);
const nextIso = (expr: string, after: string) => next(cron(expr), at(after))?.toISOString() ?? null;

describe('cron', () => {
  it('fires on the next matching minute, strictly after the given time, in UTC', () => {
    assert.equal(nextIso('* * * * *', '2026-03-01T10:15:30Z'), '2026-03-01T10:16:00.000Z');
    assert.equal(nextIso('* * * * *', '2026-03-01T10:15:00Z'), '2026-03-01T10:16:00.000Z');
    assert.equal(nextIso('30 9 * * *', '2026-03-01T09:30:00Z'), '2026-03-02T09:30:00.000Z');
    assert.equal(nextIso('30 9 * * *', '2026-03-01T09:29:59Z'), '2026-03-01T09:30:00.000Z');
    assert.equal(nextIso('0 0 1 1 *', '2026-06-01T00:00:00Z'), '2027-01-01T00:00:00.000Z');
  });

  it('understands lists, ranges, steps and names', () => {
    assert.equal(nextIso('*/15 * * * *', '2026-03-01T10:16:00Z'), '2026-03-01T10:30:00.000Z');
    assert.equal(nextIso('5,50 * * * *', '2026-03-01T10:06:00Z'), '2026-03-01T10:50:00.000Z');
    assert.equal(nextIso('0 8-10/2 * * *', '2026-03-01T08:00:00Z'), '2026-03-01T10:00:00.000Z');
    assert.equal(nextIso('10/20 * * * *', '2026-03-01T10:31:00Z'), '2026-03-01T10:50:00.000Z');
    // 2026-03-01 is a Sunday.
    assert.equal(nextIso('0 9 * * mon-fri', '2026-03-01T00:00:00Z'), '2026-03-02T09:00:00.000Z');
    assert.equal(nextIso('0 9 * MAR sat', '2026-03-01T00:00:00Z'), '2026-03-07T09:00:00.000Z');
    assert.equal(nextIso('0 0 * * 7', '2026-03-02T00:00:00Z'), '2026-03-08T00:00:00.000Z');
  });

  it('ORs day-of-month and day-of-week only when both are restricted', () => {
    // The 15th, or any Friday (2026-03-06 is a Friday).
    assert.equal(nextIso('0 0 15 * fri', '2026-03-01T00:00:00Z'), '2026-03-06T00:00:00.000Z');
    assert.equal(nextIso('0 0 15 * *', '2026-03-01T00:00:00Z'), '2026-03-15T00:00:00.000Z');
    assert.equal(nextIso('0 0 */10 * fri', '2026-03-01T00:00:00Z'), '2026-03-06T00:00:00.000Z');
  });

  it('finds leap days and month ends', () => {
    assert.equal(nextIso('0 12 29 2 *', '2026-03-01T00:00:00Z'), '2028-02-29T12:00:00.000Z');
    assert.equal(nextIso('0 0 31 * *', '2026-04-01T00:00:00Z'), '2026-05-31T00:00:00.000Z');
  });

  it('accepts the @-names and refuses @reboot', () => {
    assert.equal(nextIso('@daily', '2026-03-01T10:00:00Z'), '2026-03-02T00:00:00.000Z');
    assert.equal(nextIso('@hourly', '2026-03-01T10:00:00Z'), '2026-03-01T11:00:00.000Z');
    assert.equal(nextIso('@weekly', '2026-03-02T10:00:00Z'), '2026-03-08T00:00:00.000Z');
    assert.equal(nextIso('@monthly', '2026-03-02T10:00:00Z'), '2026-04-01T00:00:00.000Z');
    assert.equal(nextIso('@YEARLY', '2026-03-02T10:00:00Z'), '2027-01-01T00:00:00.000Z');
    const reboot = parseCron('@reboot');
    assert.equal(reboot.ok, false);
    assert.match(reboot.ok ? '' : reboot.error, /@reboot/);
  });

  it('refuses malformed expressions with a message naming the field', () => {
    const bad: Array<[string, RegExp]> = [
      ['', /empty/],
      ['* * * *', /5 fields/],
      ['* * * * * *', /5 fields/],
      ['60 * * * *', /minute/],
      ['* 24 * * *', /hour/],
      ['* * 0 * *', /day of month/],
      ['* * * 13 *', /month/],
      ['* * * * 8', /day of week/],
      ['*/0 * * * *', /minute/],
      ['5-1 * * * *', /minute/],
      ['a * * * *', /minute/],
      ['1,,2 * * * *', /minute/],
      ['@sometimes', /unknown cron name/],
      ['0 0 30 2 *', /never fires/],
    ];
    for (const [expr, msg] of bad) {
      const r = parseCron(expr);
      assert.equal(r.ok, false, `${expr} should be refused`);
      assert.match(r.ok ? '' : r.error, msg, expr);
    }
  });
});
