/**
 * How the CLI says a place in the capacity queue: "queued — 2nd in line". One wording for chat,
 * the conversation list and a conversation's turns.
 */

/** 1 → "1st", 2 → "2nd", 11 → "11th", 23 → "23rd". */
export function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? 'th' : (({ 1: 'st', 2: 'nd', 3: 'rd' } as Record<number, string>)[n % 10] ?? 'th');
  return `${n}${suffix}`;
}

export const inLine = (position: number): string => `queued — ${ordinal(position)} in line`;
