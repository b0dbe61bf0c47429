//! A seccomp filter that closes what Landlock leaves open to a program without network.
//!
//! Landlock (up to ABI 6, the newest the `landlock` crate 0.4 knows) rules TCP `bind` and
//! `connect` only: a program under it may still send UDP datagrams (DNS to any resolver,
//! anything to a loopback listener), open raw or packet sockets where it has the
//! capability (root), and reach the network through paths that never call `connect`: TCP
//! Fast Open (`sendto`/`sendmsg` with `MSG_FASTOPEN`) and io_uring's own socket
//! operations. So a program under Landlock that has no network also gets this filter,
//! installed on the thread that starts it (after `PR_SET_NO_NEW_PRIVS`, as Landlock's
//! rules are) and so inherited, which fails with
//! `EACCES`:
//! - `socket` of `AF_INET` or `AF_INET6` of any type but `SOCK_STREAM` (UDP, raw, ICMP
//!   datagram), and of `AF_PACKET`;
//! - `sendto`, `sendmsg` and `sendmmsg` with `MSG_FASTOPEN`;
//! - `io_uring_setup`;
//! - on x86-64, the same calls of the 32-bit (`i386`, including `socketcall`) and `x32`
//!   system-call tables.
//!
//! Everything else passes (Unix sockets among them, which Landlock's scopes and the file
//! rules govern). Under bubblewrap the program has a network namespace of its own and
//! needs none of this. The filter exists for x86-64 and AArch64; elsewhere a program
//! under Landlock keeps UDP, as `docs/run_code.md` says.

/// A filter ready to install.
#[cfg(target_os = "linux")]
pub(super) type Filter = seccompiler::BpfProgram;
/// A filter ready to install.
#[cfg(not(target_os = "linux"))]
pub(super) type Filter = Vec<()>;

/// The filter; `None` on an architecture it does not know.
pub(super) fn no_network_filter() -> Option<Filter> {
    #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Some(build())
    }
    #[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    {
        None
    }
}

/// Installs `filter` on the calling thread (after `PR_SET_NO_NEW_PRIVS`): the programs it
/// starts after inherit it.
pub(super) fn install(filter: &Filter) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        seccompiler::apply_filter(filter)
            .map_err(|e| format!("cannot apply the seccomp filter: {e}"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = filter;
        Err("seccomp is a Linux facility".into())
    }
}

#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
fn build() -> Filter {
    use libc::{
        BPF_ABS, BPF_ALU, BPF_AND, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W,
    };
    use seccompiler::sock_filter;
    const ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
    const DENY: u32 = 0x0005_0000 | libc::EACCES as u32; // SECCOMP_RET_ERRNO | EACCES
    // Offsets in `struct seccomp_data`: nr, arch, ip, args[6] (the low word of each
    // argument first: both architectures are little-endian).
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    const fn arg(n: u32) -> u32 {
        16 + 8 * n
    }
    #[cfg(target_arch = "x86_64")]
    const NATIVE: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
    #[cfg(target_arch = "aarch64")]
    const NATIVE: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64
    const MSG_FASTOPEN: u32 = 0x2000_0000;
    const IO_URING_SETUP: u32 = 425;

    /// A program with symbolic jumps, resolved once every label is placed.
    #[derive(Clone, Copy)]
    enum To {
        Next,
        Label(&'static str),
    }
    enum Op {
        Stmt(u16, u32),
        Jump(u16, u32, To, To),
        Label(&'static str),
    }
    let stmt = |code: u32, k: u32| Op::Stmt(code as u16, k);
    let jeq = |k: u32, t: To, f: To| Op::Jump((BPF_JMP | BPF_JEQ | BPF_K) as u16, k, t, f);
    let jset = |k: u32, t: To, f: To| Op::Jump((BPF_JMP | BPF_JSET | BPF_K) as u16, k, t, f);
    let load = |offset: u32| stmt(BPF_LD | BPF_W | BPF_ABS, offset);
    let ret = |k: u32| stmt(BPF_RET | BPF_K, k);
    use To::{Label as L, Next};

    let mut ops: Vec<Op> = Vec::new();
    ops.push(load(ARCH));
    ops.push(jeq(NATIVE, L("native"), Next));
    #[cfg(target_arch = "x86_64")]
    {
        // i386: socketcall (102) multiplexes every socket call: all refused.
        ops.push(jeq(0x4000_0003, Next, L("allow"))); // AUDIT_ARCH_I386
        ops.push(load(NR));
        ops.push(jeq(102, L("deny"), Next)); // socketcall
        ops.push(jeq(359, L("socket"), Next)); // socket
        ops.push(jeq(369, L("sendto"), Next)); // sendto: flags are argument 3
        ops.push(jeq(370, L("sendmsg"), Next)); // sendmsg: flags are argument 2
        ops.push(jeq(345, L("sendmsg"), Next)); // sendmmsg: flags are argument 3
        ops.push(jeq(IO_URING_SETUP, L("deny"), L("allow")));
    }
    #[cfg(target_arch = "aarch64")]
    {
        // 32-bit Arm programs: socket (281), sendto (290), sendmsg (296), sendmmsg (374).
        ops.push(jeq(0x4000_0028, Next, L("allow"))); // AUDIT_ARCH_ARM
        ops.push(load(NR));
        ops.push(jeq(281, L("socket"), Next));
        ops.push(jeq(290, L("sendto"), Next));
        ops.push(jeq(296, L("sendmsg"), Next));
        ops.push(jeq(374, L("sendto"), Next));
        ops.push(jeq(IO_URING_SETUP, L("deny"), L("allow")));
    }
    ops.push(Op::Label("native"));
    ops.push(load(NR));
    // x32 calls are the x86-64 ones with bit 30 set: the same checks apply.
    #[cfg(target_arch = "x86_64")]
    ops.push(stmt(BPF_ALU | BPF_AND | BPF_K, !0x4000_0000u32));
    ops.push(jeq(libc::SYS_socket as u32, L("socket"), Next));
    ops.push(jeq(libc::SYS_sendto as u32, L("sendto"), Next));
    ops.push(jeq(libc::SYS_sendmsg as u32, L("sendmsg"), Next));
    ops.push(jeq(libc::SYS_sendmmsg as u32, L("sendto"), Next));
    ops.push(jeq(IO_URING_SETUP, L("deny"), L("allow")));
    // socket(domain, type, protocol)
    ops.push(Op::Label("socket"));
    ops.push(load(arg(0)));
    ops.push(jeq(libc::AF_PACKET as u32, L("deny"), Next));
    ops.push(jeq(libc::AF_INET as u32, L("inet"), Next));
    ops.push(jeq(libc::AF_INET6 as u32, L("inet"), L("allow")));
    ops.push(Op::Label("inet"));
    ops.push(load(arg(1)));
    ops.push(stmt(BPF_ALU | BPF_AND | BPF_K, 0xf)); // SOCK_TYPE_MASK
    ops.push(jeq(libc::SOCK_STREAM as u32, L("allow"), L("deny")));
    // sendto(fd, buf, len, flags, …) and sendmmsg(fd, vec, n, flags)
    ops.push(Op::Label("sendto"));
    ops.push(load(arg(3)));
    ops.push(jset(MSG_FASTOPEN, L("deny"), L("allow")));
    // sendmsg(fd, msg, flags)
    ops.push(Op::Label("sendmsg"));
    ops.push(load(arg(2)));
    ops.push(jset(MSG_FASTOPEN, L("deny"), L("allow")));
    ops.push(Op::Label("allow"));
    ops.push(ret(ALLOW));
    ops.push(Op::Label("deny"));
    ops.push(ret(DENY));

    // Resolve the labels into relative jumps (all forward, all short).
    let mut at = std::collections::BTreeMap::new();
    let mut index = 0usize;
    for op in &ops {
        match op {
            Op::Label(name) => {
                at.insert(*name, index);
            }
            _ => index += 1,
        }
    }
    let mut out = Vec::new();
    for op in &ops {
        let here = out.len();
        let offset = |to: To| -> u8 {
            match to {
                To::Next => 0,
                To::Label(name) => {
                    let target = at[name];
                    u8::try_from(target - here - 1).unwrap_or(u8::MAX)
                }
            }
        };
        match op {
            Op::Label(_) => {}
            Op::Stmt(code, k) => out.push(sock_filter { code: *code, jt: 0, jf: 0, k: *k }),
            Op::Jump(code, k, t, f) => {
                out.push(sock_filter { code: *code, jt: offset(*t), jf: offset(*f), k: *k })
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::sandbox::limits::tests::Tool;
    use crate::{Access, Sandbox, SandboxMode};

    /// A tool that tries UDP to a loopback port, then other sockets; prints what it could.
    const PROBE: &str = r#"
import json, socket, sys
port = int(open(sys.argv[0] + ".port").read())
said = {}
def attempt(what, act):
    try:
        act()
        said[what] = "ok"
    except OSError as e:
        said[what] = "refused: %s" % e
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"escaped", ("127.0.0.1", port))
def udp6():
    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()
def tcp_socket():
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
def unix():
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close()
attempt("udp", udp)
attempt("udp6", udp6)
attempt("raw", raw)
attempt("tcp_socket", tcp_socket)
attempt("unix", unix)
print(json.dumps(said))
"#;

    #[test]
    fn under_landlock_a_tool_without_network_cannot_send_udp_to_loopback() {
        let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let tool = Tool::new("udp", PROBE);
        std::fs::write(tool.program.with_extension("port"), port.to_string()).unwrap();
        let sandbox = Sandbox { mode: SandboxMode::Landlock, ..Sandbox::default() };
        let said = tool.run(&sandbox, &tool.access()).unwrap();
        for what in ["udp", "udp6", "raw"] {
            let answer = said[what].as_str().unwrap_or_default();
            assert!(answer.starts_with("refused: [Errno 13]"), "{what}: {said}");
        }
        // What Landlock rules itself (a TCP socket, whose connect it refuses) and Unix
        // sockets are left alone.
        assert_eq!(said["tcp_socket"], "ok", "{said}");
        assert_eq!(said["unix"], "ok", "{said}");
        let mut buf = [0u8; 64];
        assert!(listener.recv_from(&mut buf).is_err(), "a datagram got through");
        // The same tool with the network declared and allowed reaches the listener: the
        // check above can fail.
        let open = Sandbox { network: true, ..sandbox };
        let access = Access { network: true, ..tool.access() };
        let said = tool.run(&open, &access).unwrap();
        assert_eq!(said["udp"], "ok", "{said}");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (n, _) = listener.recv_from(&mut buf).expect("the datagram arrived");
        assert_eq!(&buf[..n], b"escaped");
    }

    #[test]
    fn the_filter_is_built_for_this_machine() {
        let filter = super::no_network_filter();
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            let filter = filter.unwrap();
            assert!(filter.len() < 64, "{}", filter.len());
            // Every jump lands inside the program.
            for (i, op) in filter.iter().enumerate() {
                assert!(
                    i + 1 + usize::from(op.jt.max(op.jf)) < filter.len() || op.code & 0x07 == 0x06
                );
            }
        }
    }
}
