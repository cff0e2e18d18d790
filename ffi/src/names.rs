//! Mapping the core's named enums onto the C ABI's.
//!
//! The core names every loss reason and node outcome (`"taken_over"`); the C
//! enum spells the same name as its variant (`FENCELOCK_LOSS_TAKEN_OVER`). So
//! the mapping is by name, and a variant the core adds without the C enum
//! falls back to the enum's catch-all (the unit tests make that fail).

use strum::VariantArray;

/// The variant of C enum `E` called `prefix` + the upper-cased `name`, if any.
pub(crate) fn by_core_name<E>(prefix: &str, name: &str) -> Option<E>
where
    E: VariantArray + Copy + Into<&'static str>,
{
    E::VARIANTS.iter().copied().find(|variant| {
        let variant_name: &str = (*variant).into();
        variant_name
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.eq_ignore_ascii_case(name))
    })
}
