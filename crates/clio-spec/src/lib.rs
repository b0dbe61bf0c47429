//! Agent definitions, frozen specs, checksums, plugin references and version ranges.
