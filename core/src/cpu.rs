//! The call path's word kernels, compiled for the CPU they run on: [`popcount`] (member
//! counts, with `POPCNT`) and [`words`] (the routers' AND passes and "anything left" scans,
//! with AVX2).
//!
//! Users build with the default `x86_64` target, which has neither instruction. So each
//! kernel is compiled twice on x86-64 by `kernels!` — plainly (`plain`), and inside a
//! `#[target_feature(enable = …)]` function — and `dispatch!` calls the second when the CPU
//! reports the feature at run time (`is_x86_feature_detected!`, a cached load after the
//! first call). On other targets only the plain build exists.
//!
//! **Why `unsafe` here.** Calling a `#[target_feature]` function is `unsafe`: on a CPU without
//! the feature it would execute an illegal instruction. This module (with its two children)
//! is the only place of the library crates, outside plugin crates, that allows
//! `unsafe_code`, and the one `unsafe` block is in `dispatch!`, guarded by the run-time
//! check right before it. The kernels themselves are safe Rust; both builds compute exactly
//! the same results (each child's tests check them against the plain build and a model).
#![allow(unsafe_code)]

/// Runs `$fast::$kernel($args)`, the kernel compiled with `$feature`, when the CPU has the
/// feature, else `plain::$kernel($args)`. `$feature` is the feature's name as a string
/// literal, as `is_x86_feature_detected!` takes it.
macro_rules! dispatch {
    ($feature:tt, $fast:ident :: $kernel:ident($($arg:expr),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!($feature) {
                // SAFETY: the CPU supports `$feature` (checked just above), the only
                // requirement of calling a `#[target_feature(enable = $feature)]` function.
                return unsafe { $fast::$kernel($($arg),*) };
            }
        }
        plain::$kernel($($arg),*)
    }};
}

/// Defines every kernel twice: plainly (`mod plain`) and with `$feature` enabled (`mod
/// $fast`, on x86-64), and each kernel's public function, which dispatches, with the
/// kernel's doc comment.
macro_rules! kernels {
    ($feature:tt, $fast:ident; $($(#[doc = $doc:literal])* fn $name:ident($($arg:ident : $ty:ty),*) -> $ret:ty $body:block)*) => {
        mod plain {
            $(
                #[inline(always)]
                #[allow(clippy::unused_unit)]
                pub(super) fn $name($($arg: $ty),*) -> $ret $body
            )*
        }
        #[cfg(target_arch = "x86_64")]
        mod $fast {
            $(
                #[target_feature(enable = $feature)]
                #[allow(clippy::unused_unit)]
                pub(super) fn $name($($arg: $ty),*) -> $ret {
                    super::plain::$name($($arg),*)
                }
            )*
        }
        $(
            $(#[doc = $doc])*
            #[inline]
            #[allow(clippy::unused_unit)]
            pub fn $name($($arg: $ty),*) -> $ret {
                dispatch!($feature, $fast::$name($($arg),*))
            }
        )*
    };
}

pub mod popcount;
pub mod words;
