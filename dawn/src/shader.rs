//! WGSL shader modules; compilation messages become errors with line and column.

use std::ffi::c_void;

use dawn_sys as sys;

use crate::device::Device;
use crate::error::{CompilationMessage, Error, MessageKind, Result};
use crate::future;
use crate::handle::{device_child_is_thread_safe, handle};
use crate::strings;

handle!(
    /// A compiled WGSL module.
    ShaderModule,
    sys::WGPUShaderModule,
    sys::wgpuShaderModuleAddRef,
    sys::wgpuShaderModuleRelease
);
// Immutable once created; GetCompilationInfo returns a future whose callback Dawn runs once.
device_child_is_thread_safe!(ShaderModule);

impl Device {
    /// Compiles WGSL. Any compiler error is returned as [`Error::ShaderCompilation`], with every
    /// message's line and column; warnings alone do not fail.
    pub fn create_shader_module(&self, label: Option<&str>, wgsl: &str) -> Result<ShaderModule> {
        let source = sys::WGPUShaderSourceWGSL {
            chain: sys::WGPUChainedStruct {
                next: std::ptr::null_mut(),
                sType: sys::WGPUSType::ShaderSourceWGSL,
            },
            code: sys::WGPUStringView::new(wgsl),
        };
        let desc = sys::WGPUShaderModuleDescriptor {
            nextInChain: (&source.chain as *const sys::WGPUChainedStruct).cast_mut(),
            label: strings::to_view(label),
        };
        let (module, error) = self.capture(|| {
            // SAFETY: a valid device; the descriptor and source live during the call.
            ShaderModule::wrap(unsafe { sys::wgpuDeviceCreateShaderModule(self.as_raw(), &desc) })
        })?;
        let label = label.unwrap_or("unnamed").to_owned();
        // An invalid module still reports its compiler messages, with their locations.
        let messages = module.compilation_messages(self).unwrap_or_default();
        if messages.iter().any(|m| m.kind == MessageKind::Error) {
            return Err(Error::ShaderCompilation { label, messages });
        }
        if let Some(error) = error {
            let text = error.to_string();
            return Err(Error::ShaderCompilation {
                label,
                messages: vec![CompilationMessage {
                    kind: MessageKind::Error,
                    line: 0,
                    column: 0,
                    message: text,
                }],
            });
        }
        Ok(module)
    }
}

impl ShaderModule {
    /// The compiler's messages for this module (errors, warnings, notes).
    pub fn compilation_messages(&self, device: &Device) -> Result<Vec<CompilationMessage>> {
        let (slot, userdata) = future::slot::<Vec<CompilationMessage>>();
        let callback = sys::WGPUCompilationInfoCallbackInfo {
            nextInChain: std::ptr::null_mut(),
            mode: sys::WGPUCallbackMode::AllowSpontaneous,
            callback: Some(on_compilation_info),
            userdata1: userdata,
            userdata2: std::ptr::null_mut(),
        };
        // SAFETY: a valid module; the callback gets `userdata` back exactly once.
        let id = unsafe { sys::wgpuShaderModuleGetCompilationInfo(self.as_raw(), callback) };
        future::GpuFuture::new(device.instance(), id, slot).wait_timeout(device.wait_timeout())
    }
}

unsafe extern "C" fn on_compilation_info(
    status: sys::WGPUCompilationInfoRequestStatus,
    info: *const sys::WGPUCompilationInfo,
    userdata1: *mut c_void,
    _: *mut c_void,
) {
    future::guard(|| {
        let result = if status == sys::WGPUCompilationInfoRequestStatus::Success && !info.is_null() {
            // SAFETY: Dawn passes a valid info struct for the duration of the callback.
            let info = unsafe { &*info };
            let messages: &[sys::WGPUCompilationMessage] = if info.messages.is_null() {
                &[]
            } else {
                // SAFETY: `messageCount` valid elements.
                unsafe { std::slice::from_raw_parts(info.messages, info.messageCount) }
            };
            Ok(messages
                .iter()
                .map(|m| CompilationMessage {
                    kind: match m.type_ {
                        sys::WGPUCompilationMessageType::Error => MessageKind::Error,
                        sys::WGPUCompilationMessageType::Warning => MessageKind::Warning,
                        _ => MessageKind::Info,
                    },
                    line: m.lineNum,
                    column: m.linePos,
                    message: strings::from_view(m.message),
                })
                .collect::<Vec<_>>())
        } else {
            Err(Error::Cancelled("compilation info was not delivered".into()))
        };
        // SAFETY: `userdata1` came from `future::slot`; called once.
        unsafe { future::complete(userdata1, result) };
    });
}
