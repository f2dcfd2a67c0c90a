/**
 * The seccomp filter every namespace sandbox runs under: no new user namespace (unshare or clone
 * with CLONE_NEWUSER refused with EPERM), clone3 answered ENOSYS so libc falls back to clone, whose flags it can see.
 */

// Classic BPF opcodes and the seccomp_data layout (nr at 0, arch at 4, args[0] low word at 16 on little-endian).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
const EPERM = 1;
const ENOSYS = 38;
const CLONE_NEWUSER = 0x10000000;
/** x32 syscalls on x86_64 carry this bit; none of them is allowed to slip past the numbers below. */
const X32_BIT = 0x40000000;

interface Arch {
  readonly audit: number;
  readonly unshare: number;
  readonly clone: number;
  readonly clone3: number;
}

const ARCHES: Readonly<Record<string, Arch>> = {
  x64: { audit: 0xc000003e, unshare: 272, clone: 56, clone3: 435 },
  arm64: { audit: 0xc00000b7, unshare: 97, clone: 220, clone3: 435 },
};

type Insn = { code: number; jt?: string; jf?: string; k: number; label?: string };

function assemble(prog: readonly Insn[]): Buffer {
  const at = new Map(prog.flatMap((p, i) => (p.label ? [[p.label, i] as const] : [])));
  const out = Buffer.alloc(prog.length * 8);
  prog.forEach((p, i) => {
    const rel = (l: string | undefined) => (l === undefined ? 0 : at.get(l)! - i - 1);
    out.writeUInt16LE(p.code, i * 8);
    out.writeUInt8(rel(p.jt), i * 8 + 2);
    out.writeUInt8(rel(p.jf), i * 8 + 3);
    out.writeUInt32LE(p.k >>> 0, i * 8 + 4);
  });
  return out;
}

/** The compiled filter for this machine's architecture (bwrap's `--seccomp` format), or null where unknown. */
export function userNamespaceFilter(arch: string = process.arch): Buffer | null {
  const a = ARCHES[arch];
  if (!a) return null;
  return assemble([
    { code: LD_W_ABS, k: 4 },
    // Another ABI (i386 on x86_64) has other numbers: refused outright rather than left unchecked.
    { code: JEQ_K, k: a.audit, jf: 'nosys' },
    { code: LD_W_ABS, k: 0 },
    ...(arch === 'x64' ? [{ code: JGE_K, k: X32_BIT, jt: 'nosys' }] : []),
    { code: JEQ_K, k: a.unshare, jt: 'flags' },
    { code: JEQ_K, k: a.clone, jt: 'flags' },
    { code: JEQ_K, k: a.clone3, jt: 'nosys' },
    { code: RET_K, k: RET_ALLOW },
    { code: LD_W_ABS, k: 16, label: 'flags' },
    { code: JSET_K, k: CLONE_NEWUSER, jt: 'eperm' },
    { code: RET_K, k: RET_ALLOW },
    { code: RET_K, k: RET_ERRNO | EPERM, label: 'eperm' },
    { code: RET_K, k: RET_ERRNO | ENOSYS, label: 'nosys' },
  ]);
}
