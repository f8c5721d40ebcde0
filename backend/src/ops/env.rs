//! What an op needs of the context that runs it, and nothing more: the device, its limits and
//! facts, the tuning, the compiled kernels, the scratch memory and the kernels of recent plans.
//! [`crate::GpuContext::env`] lends one; ops take it rather than the context, so that nothing
//! below the context reaches back into it.

use std::sync::Arc;

use dawn::{Buffer, Device, Limits};

use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::facts::DeviceFacts;
use crate::kernel::{Access, Pipeline, PipelineCache, PlanMemo};
use crate::memory::DeviceTensor;
use crate::scratch::Scratch;
use crate::shader_lib::ShaderVariant;
use crate::tuning::Tuning;

use super::{argmax, binary, flash_attn, glu, mul_mat, norm, rope, rows, scale, soft_max};

/// The compiled kernels of the ops' recent plans, per device (see [`crate::kernel::PlanMemo`]).
#[derive(Debug, Default)]
pub(crate) struct PlanKernelMemos {
    pub mul_mat: PlanMemo<mul_mat::MulMatPlan, Arc<mul_mat::encode::PlanKernels>>,
    pub flash_attn: PlanMemo<flash_attn::FlashAttnPlan, Arc<flash_attn::PlanKernels>>,
    /// The one-kernel ops: their plan and bindings' access name the kernel.
    pub single: PlanMemo<(SinglePlan, AccessKey), Arc<Pipeline>>,
}

/// The plan of an op that records one kernel: a kernel's variant is a function of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum SinglePlan {
    Norm(norm::NormPlan),
    Rope(rope::RopePlan),
    SoftMax(soft_max::SoftMaxPlan),
    Scale(scale::ScalePlan),
    Argmax(argmax::ArgmaxPlan),
    Glu(glu::GluPlan),
    Rows(rows::RowsPlan),
    Binary(binary::BinaryPlan),
}

/// A kernel's storage bindings' access, in order, as a small value (at most 16 bindings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AccessKey {
    len: u8,
    writes: u16,
}

impl AccessKey {
    fn of(access: &[Access]) -> Option<AccessKey> {
        if access.len() > 16 {
            return None;
        }
        let writes = access
            .iter()
            .enumerate()
            .fold(0u16, |w, (i, a)| if *a == Access::ReadWrite { w | (1 << i) } else { w });
        Some(AccessKey {
            len: access.len() as u8,
            writes,
        })
    }
}

/// The device and what runs on it, as the ops see it (borrowed from a context).
#[derive(Debug, Clone, Copy)]
pub struct Env<'a> {
    pub(crate) device: &'a Device,
    limits: &'a Limits,
    facts: DeviceFacts,
    tuning: &'a Tuning,
    kernels: &'a PipelineCache,
    scratch: &'a Scratch,
    plan_kernels: &'a PlanKernelMemos,
}

impl<'a> Env<'a> {
    pub(crate) fn new(
        device: &'a Device,
        limits: &'a Limits,
        facts: DeviceFacts,
        tuning: &'a Tuning,
        kernels: &'a PipelineCache,
        scratch: &'a Scratch,
        plan_kernels: &'a PlanKernelMemos,
    ) -> Env<'a> {
        Env {
            device,
            limits,
            facts,
            tuning,
            kernels,
            scratch,
            plan_kernels,
        }
    }

    /// The device's limits.
    pub fn limits(&self) -> &Limits {
        self.limits
    }

    /// The device as the planners see it.
    pub fn facts(&self) -> DeviceFacts {
        self.facts
    }

    /// The same environment with the planners seeing `facts` (tests force a kernel's paths
    /// with it, e.g. no subgroups). Facts that claim more than the device has are refused
    /// ([`DeviceFacts::check_within`]).
    pub fn with_facts(&self, facts: DeviceFacts) -> Result<Env<'a>> {
        facts
            .check_within(&self.facts)
            .map_err(|message| BackendError::Config {
                name: "device facts",
                message,
            })?;
        Ok(Env { facts, ..*self })
    }

    /// The planners' knobs.
    pub fn tuning(&self) -> &Tuning {
        self.tuning
    }

    /// The kernel of `variant`, compiled on first use.
    pub(crate) fn kernel(&self, variant: &ShaderVariant, storage: &[Access]) -> Result<Arc<Pipeline>> {
        self.kernels.get(self.device, variant, storage)
    }

    /// The kernel of a one-kernel op's `plan` binding `storage`: found by comparing plans among
    /// the recent ones, else `variant`'s (built only then, compiled on first use).
    pub(crate) fn plan_kernel(
        &self,
        plan: SinglePlan,
        storage: &[Access],
        variant: impl FnOnce() -> ShaderVariant,
    ) -> Result<Arc<Pipeline>> {
        match AccessKey::of(storage) {
            Some(key) => self
                .plan_kernels
                .single
                .get_or_try_insert(&(plan, key), || self.kernel(&variant(), storage)),
            None => self.kernel(&variant(), storage),
        }
    }

    /// The kernels of the ops' recent plans.
    pub(crate) fn plan_kernels(&self) -> &'a PlanKernelMemos {
        self.plan_kernels
    }

    /// The scratch buffer for `label`, at least `bytes` long.
    pub(crate) fn scratch_buffer(&self, label: &'static str, bytes: u64) -> Result<Buffer> {
        self.scratch.get(self.device, label, bytes)
    }

    /// Refuses tensors whose buffer belongs to another device: a kernel of this device must
    /// never bind another device's memory (nothing else would stop it without validation).
    pub(crate) fn check_operands(&self, tensors: &[&DeviceTensor]) -> Result<()> {
        for t in tensors {
            if t.buffer().device().as_raw() != self.device.as_raw() {
                return Err(BackendError::InvalidOperands(
                    "a tensor's buffer belongs to another device than the context's".into(),
                ));
            }
        }
        Ok(())
    }

    /// Refuses a stream of another device: its kernels, bind groups and commands would mix this
    /// device's objects with another device's, which nothing checks without validation.
    pub(crate) fn check_stream(&self, stream: &Stream) -> Result<()> {
        if !stream.is_on(self.device) {
            return Err(BackendError::InvalidOperands(
                "the stream records on another device than the context's".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_keys_tell_bindings_apart() {
        use Access::{Read, ReadWrite};
        let k = |a: &[Access]| AccessKey::of(a).expect("at most 16 bindings");
        assert_eq!(k(&[Read, ReadWrite]), k(&[Read, ReadWrite]));
        assert_ne!(k(&[Read, ReadWrite]), k(&[Read, Read, ReadWrite]));
        assert_ne!(k(&[Read, ReadWrite]), k(&[ReadWrite, Read]));
        assert_ne!(k(&[Read]), k(&[Read, Read]));
        assert!(AccessKey::of(&[Read; 17]).is_none());
    }
}
