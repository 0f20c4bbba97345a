//! The machine code written over a victim's vDSO `clock_gettime` (x86_64,
//! System V ABI: clock id in `edi`, `struct timespec *` in `rsi`, result in
//! `eax`):
//!
//! ```text
//!       mov  eax, 228            ; SYS_clock_gettime: the kernel's true time
//!       syscall                  ; (keeps rdi and rsi; clobbers rcx, r11)
//!       test eax, eax
//!       jnz  done                ; failed: return the error as is
//!       test edi, edi            ; CLOCK_REALTIME
//!       jz   shift
//!       cmp  edi, 5              ; CLOCK_REALTIME_COARSE
//!       jnz  done                ; other clocks (monotonic...) untouched
//! shift:
//!       movabs rcx, SECS
//!       add  [rsi], rcx          ; tv_sec += SECS
//!       mov  rcx, [rsi+8]
//!       add  rcx, NANOS          ; tv_nsec += NANOS (0 <= NANOS < 1e9)
//!       cmp  rcx, 1000000000
//!       jl   store
//!       sub  rcx, 1000000000
//!       inc  qword [rsi]         ; carry into tv_sec
//! store:
//!       mov  [rsi+8], rcx
//! done: ret
//! ```
//!
//! It uses no stack (Go calls the vDSO on a small one) and no data, so it
//! runs wherever the vDSO is mapped.

use crate::kinds::Skew;

/// How every patch starts (`mov eax, 228; syscall`): a function that starts
/// so is already patched.
pub const SIGNATURE: [u8; 7] = [0xb8, 0xe4, 0x00, 0x00, 0x00, 0x0f, 0x05];

const BILLION: [u8; 4] = 1_000_000_000u32.to_le_bytes();

/// The code that shifts CLOCK_REALTIME and CLOCK_REALTIME_COARSE by `skew`.
pub fn skew_code(skew: Skew) -> Vec<u8> {
    let (secs, nanos) = skew.split();
    let head = |done1: u8, shift: u8, done2: u8| {
        let mut c = SIGNATURE.to_vec();
        c.extend([0x85, 0xc0, 0x75, done1]); // test eax,eax; jnz done
        c.extend([0x85, 0xff, 0x74, shift]); // test edi,edi; jz shift
        c.extend([0x83, 0xff, 0x05, 0x75, done2]); // cmp edi,5; jnz done
        c
    };
    let mut shift = vec![0x48, 0xb9]; // movabs rcx, secs
    shift.extend(secs.to_le_bytes());
    shift.extend([0x48, 0x01, 0x0e]); // add [rsi], rcx
    shift.extend([0x48, 0x8b, 0x4e, 0x08]); // mov rcx, [rsi+8]
    shift.extend([0x48, 0x81, 0xc1]); // add rcx, imm32
    shift.extend(nanos.to_le_bytes());
    shift.extend([0x48, 0x81, 0xf9]); // cmp rcx, 1e9
    shift.extend(BILLION);
    let carry: Vec<u8> = [0x48, 0x81, 0xe9] // sub rcx, 1e9
        .into_iter()
        .chain(BILLION)
        .chain([0x48, 0xff, 0x06]) // inc qword [rsi]
        .collect();
    shift.extend([0x7c, rel(carry.len())]); // jl store
    shift.extend(carry);
    shift.extend([0x48, 0x89, 0x4e, 0x08]); // store: mov [rsi+8], rcx
    // From the end of each jump to `shift` / `done` (the ret after it).
    let after_jnz1 = 4 + 4 + 5; // bytes of head after the first jnz's end
    let after_jz = 5;
    let mut code = head(
        rel(after_jnz1 - 4 + shift.len()),
        rel(after_jz),
        rel(shift.len()),
    );
    debug_assert_eq!(code.len(), SIGNATURE.len() + after_jnz1);
    code.extend(shift);
    code.push(0xc3); // done: ret
    code
}

fn rel(n: usize) -> u8 {
    u8::try_from(n).expect("the patch's jumps are short (under 128 bytes)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follows a short jump at `at` (opcode, rel8): where it lands.
    fn target(code: &[u8], at: usize) -> usize {
        at + 2 + usize::from(code[at + 1])
    }

    #[test]
    fn jumps_land_on_shift_store_and_ret() {
        for s in ["30s", "-30s", "1500ms", "-1500ms"] {
            let code = skew_code(s.parse().expect("skew"));
            assert_eq!(code[..7], SIGNATURE);
            let ret = code.len() - 1;
            assert_eq!(code[ret], 0xc3, "{s}: ends with ret");
            // jnz done after test eax,eax
            assert_eq!(code[9], 0x75);
            assert_eq!(target(&code, 9), ret, "{s}: a failed syscall returns");
            // jz shift lands on movabs rcx
            assert_eq!(code[13], 0x74);
            let shift = target(&code, 13);
            assert_eq!(code[shift..shift + 2], [0x48, 0xb9], "{s}");
            // jnz done after cmp edi,5
            assert_eq!(code[18], 0x75);
            assert_eq!(target(&code, 18), ret, "{s}");
            assert_eq!(shift, 20, "{s}: shift follows the checks");
            // jl store lands on mov [rsi+8], rcx, just before ret
            let jl = code.iter().position(|&b| b == 0x7c).expect("jl");
            assert_eq!(target(&code, jl), ret - 4, "{s}");
            assert_eq!(code[ret - 4..ret], [0x48, 0x89, 0x4e, 0x08], "{s}");
        }
    }

    #[test]
    fn the_offset_is_whole_seconds_and_normalized_nanoseconds() {
        let code = skew_code("-1500ms".parse().expect("skew"));
        let secs = i64::from_le_bytes(code[22..30].try_into().expect("8 bytes"));
        assert_eq!(secs, -2);
        let nanos = u32::from_le_bytes(code[40..44].try_into().expect("4 bytes"));
        assert_eq!(nanos, 500_000_000);
        assert!(skew_code("30s".parse().expect("skew")).len() < 80);
    }
}
