//! What `cargo xtask dist` ships: the npm package names, the platforms and
//! the files each package carries. Pure data and text; the file system and
//! the commands are [`crate::dist`]'s.

/// The pi package (`pi install npm:condense-pi`): the shim in
/// `crates/condense-host-pi/extension`.
pub const PI_PACKAGE: &str = "condense-pi";
/// The OpenCode plugin package (`"plugin": ["condense-opencode"]`): the
/// plugin in `crates/condense-host-opencode/plugin`.
pub const OPENCODE_PACKAGE: &str = "condense-opencode";
/// The pi shim's sources, relative to the workspace root.
pub const PI_SOURCE: &str = "crates/condense-host-pi/extension";
/// The OpenCode plugin's sources, relative to the workspace root.
pub const OPENCODE_SOURCE: &str = "crates/condense-host-opencode/plugin";
/// The client both hosts import (`../../condense-engine/client/…`), shipped
/// in both packages.
pub const CLIENT_SOURCE: &str = "crates/condense-engine/client";
/// The one binary: in every platform package's `bin/` (what the
/// `condense` package runs, and the sidecar the hosts start as `condense
/// sidecar`) and beside the packages (`target/dist/bin/`).
pub const CLI: &str = "condense";
/// The command's package (`npx condense claude`): a Node launcher in
/// `crates/condense-cli/npm` that runs the platform package's binary.
pub const CLI_PACKAGE: &str = "condense";
/// The command package's sources, relative to the workspace root.
pub const CLI_SOURCE: &str = "crates/condense-cli/npm";
/// The files the command package ships, relative to its source.
pub const CLI_FILES: [&str; 1] = ["bin/condense.js"];

/// One platform a platform package can be built for: Node's names (npm's
/// `os` and `cpu` fields) and Rust's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Platform {
    /// Node's `process.platform`: `linux`, `darwin`, `win32`.
    pub os: &'static str,
    /// Node's `process.arch`: `x64`, `arm64`.
    pub cpu: &'static str,
    /// Rust's `std::env::consts::OS` for the same platform.
    pub rust_os: &'static str,
    /// Rust's `std::env::consts::ARCH` for the same platform.
    pub rust_arch: &'static str,
    /// npm's `libc` field (Linux builds link glibc); empty elsewhere.
    pub libc: &'static str,
}

/// The platforms the layout knows. `dist` builds the one it runs on; the
/// others need a build on (or for) that platform.
pub const PLATFORMS: [Platform; 5] = [
    Platform {
        os: "linux",
        cpu: "x64",
        rust_os: "linux",
        rust_arch: "x86_64",
        libc: "glibc",
    },
    Platform {
        os: "linux",
        cpu: "arm64",
        rust_os: "linux",
        rust_arch: "aarch64",
        libc: "glibc",
    },
    Platform {
        os: "darwin",
        cpu: "x64",
        rust_os: "macos",
        rust_arch: "x86_64",
        libc: "",
    },
    Platform {
        os: "darwin",
        cpu: "arm64",
        rust_os: "macos",
        rust_arch: "aarch64",
        libc: "",
    },
    Platform {
        os: "win32",
        cpu: "x64",
        rust_os: "windows",
        rust_arch: "x86_64",
        libc: "",
    },
];

impl Platform {
    /// The platform this process runs on, if the layout knows it.
    pub fn host() -> Option<Platform> {
        Self::of(std::env::consts::OS, std::env::consts::ARCH)
    }

    /// The platform with Rust's names `os` and `arch`.
    pub fn of(os: &str, arch: &str) -> Option<Platform> {
        PLATFORMS
            .into_iter()
            .find(|p| p.rust_os == os && p.rust_arch == arch)
    }

    /// The platform package's name, `condense-<os>-<cpu>`: what the shim's
    /// lookup (`extension/locate.ts`, `platformPackage`) resolves.
    pub fn package(&self) -> String {
        format!("condense-{}-{}", self.os, self.cpu)
    }

    /// A binary's file name on this platform.
    pub fn exe(&self, name: &str) -> String {
        if self.os == "win32" {
            format!("{name}.exe")
        } else {
            name.to_owned()
        }
    }

    /// The platform package's `package.json`.
    pub fn manifest(&self, version: &str) -> String {
        let libc = if self.libc.is_empty() {
            String::new()
        } else {
            format!("  \"libc\": [{}],\n", json_string(self.libc))
        };
        format!(
            "{{\n  \"name\": {name},\n  \"version\": {version},\n  \"description\": {description},\n  \
             \"license\": \"MIT\",\n  \"os\": [{os}],\n  \"cpu\": [{cpu}],\n{libc}  \
             \"preferUnplugged\": true\n}}\n",
            name = json_string(&self.package()),
            version = json_string(version),
            description = json_string(&format!(
                "the condense binary (command and sidecar) for {}-{}; \
                 installed by condense-pi, condense-opencode and condense",
                self.os, self.cpu
            )),
            os = json_string(self.os),
            cpu = json_string(self.cpu),
        )
    }
}

/// The fields `dist` sets on a main package's own `package.json`: the
/// version, and the platform packages as optional dependencies at that same
/// version (npm installs the one whose `os`/`cpu` match).
/// With `entry` ([`entry_fields`]) the fields that name the package's
/// entry module are set too.
pub fn main_manifest_patch(version: &str, platforms: &[Platform], entry: Option<&str>) -> String {
    let deps: Vec<String> = platforms
        .iter()
        .map(|p| format!("{}: {}", json_string(&p.package()), json_string(version)))
        .collect();
    let entry = entry.map(|e| format!(", {e}")).unwrap_or_default();
    format!(
        "{{\"version\": {}, \"optionalDependencies\": {{{}}}{entry}}}",
        json_string(version),
        deps.join(", ")
    )
}

/// Whether a source file belongs in a package: TypeScript other than tests.
/// (Type declarations for the checker, `tsconfig.json` and test samples stay
/// in the repository.)
pub fn ships(file_name: &str) -> bool {
    file_name.ends_with(".ts") && !file_name.ends_with(".test.ts") && !file_name.ends_with(".d.ts")
}

/// The module specifiers `source` imports from (`from "…"`, `import "…"`).
pub fn imports(source: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for marker in ["from \"", "import \""] {
        let mut rest = source;
        while let Some(at) = rest.find(marker) {
            rest = &rest[at + marker.len()..];
            if let Some(end) = rest.find('"') {
                found.push(&rest[..end]);
                rest = &rest[end..];
            }
        }
    }
    found
}

/// Where a source directory's files go inside a package: its last two
/// path components (`condense-host-pi/extension`). A host and the client
/// keep their places relative to each other, so the host's imports of the
/// client (`../../condense-engine/client/…`) resolve in the package as in
/// the repository, unchanged.
pub fn packed_dir(source: &str) -> &str {
    let mut cut = source.rmatch_indices('/').map(|(i, _)| i + 1);
    let _ = cut.next();
    &source[cut.next().unwrap_or(0)..]
}

/// The manifest fields that name a host package's entry module, at its
/// place in the package (see [`packed_dir`]).
pub fn entry_fields(package: &str) -> Option<String> {
    if package == PI_PACKAGE {
        let entry = format!("./{}/index.ts", packed_dir(PI_SOURCE));
        Some(format!(
            "\"pi\": {{\"extensions\": [{}]}}",
            json_string(&entry)
        ))
    } else if package == OPENCODE_PACKAGE {
        let entry = format!("./{}/index.ts", packed_dir(OPENCODE_SOURCE));
        Some(format!(
            "\"main\": {e}, \"exports\": {{\".\": {e}}}",
            e = json_string(&entry)
        ))
    } else {
        None
    }
}

/// A package's README: the one-line install and where the project lives.
pub fn readme(package: &str, install: &str) -> String {
    format!(
        "# {package}\n\n{install}\n\nPart of condense: context pruning for coding agents, with every \
         pruned output recoverable. See the project's README for configuration.\n"
    )
}

/// `s` as a JSON string literal.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A string field's value in a hand-written `package.json` (first
/// occurrence; the version checks read the source manifests with it).
#[cfg(test)]
pub fn manifest_field<'a>(manifest: &'a str, field: &str) -> Option<&'a str> {
    let key = format!("\"{field}\"");
    let rest = &manifest[manifest.find(&key)? + key.len()..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    Some(&rest[..rest.find('"')?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_platform_names_match_node() {
        let linux = Platform::of("linux", "x86_64").expect("linux x64 is known");
        assert_eq!(linux.package(), "condense-linux-x64");
        assert_eq!(linux.exe("condense-pi"), "condense-pi");
        let windows = Platform::of("windows", "x86_64").expect("windows is known");
        assert_eq!(windows.package(), "condense-win32-x64");
        assert_eq!(windows.exe("condense-pi"), "condense-pi.exe");
        assert_eq!(Platform::of("plan9", "mips"), None);
        let names: std::collections::HashSet<_> = PLATFORMS.iter().map(|p| p.package()).collect();
        assert_eq!(names.len(), PLATFORMS.len(), "one package per platform");
    }

    #[test]
    fn platform_manifest_restricts_os_and_cpu() {
        let linux = Platform::of("linux", "x86_64").expect("known");
        let m = linux.manifest("1.2.3");
        assert_eq!(manifest_field(&m, "name"), Some("condense-linux-x64"));
        assert_eq!(manifest_field(&m, "version"), Some("1.2.3"));
        assert!(m.contains("\"os\": [\"linux\"]"), "{m}");
        assert!(m.contains("\"cpu\": [\"x64\"]"), "{m}");
        assert!(m.contains("\"libc\": [\"glibc\"]"), "{m}");
        let mac = Platform::of("macos", "aarch64").expect("known");
        assert!(!mac.manifest("1.2.3").contains("libc"));
    }

    #[test]
    fn main_packages_depend_on_their_platforms_at_the_same_version() {
        let platforms = [PLATFORMS[0], PLATFORMS[3]];
        assert_eq!(
            main_manifest_patch("0.4.0", &platforms, None),
            "{\"version\": \"0.4.0\", \"optionalDependencies\": \
             {\"condense-linux-x64\": \"0.4.0\", \"condense-darwin-arm64\": \"0.4.0\"}}"
        );
        assert_eq!(
            main_manifest_patch("0.4.0", &[], Some("\"main\": \"a.ts\"")),
            "{\"version\": \"0.4.0\", \"optionalDependencies\": {}, \"main\": \"a.ts\"}"
        );
    }

    #[test]
    fn a_source_keeps_its_last_two_components_in_its_package() {
        assert_eq!(packed_dir(PI_SOURCE), "condense-host-pi/extension");
        assert_eq!(packed_dir(OPENCODE_SOURCE), "condense-host-opencode/plugin");
        assert_eq!(packed_dir(CLIENT_SOURCE), "condense-engine/client");
        assert_eq!(packed_dir("a/b"), "a/b");
        assert_eq!(
            entry_fields(PI_PACKAGE).as_deref(),
            Some("\"pi\": {\"extensions\": [\"./condense-host-pi/extension/index.ts\"]}")
        );
        assert!(entry_fields(OPENCODE_PACKAGE)
            .is_some_and(|f| f.contains("\"main\": \"./condense-host-opencode/plugin/index.ts\"")));
        assert_eq!(entry_fields(CLI_PACKAGE), None);
    }

    #[test]
    fn only_runtime_typescript_ships() {
        assert!(ships("index.ts"));
        assert!(!ships("sync.test.ts"));
        assert!(!ships("pi.d.ts"));
        assert!(!ships("protocol.samples.json"));
        assert!(!ships("tsconfig.json"));
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
        assert_eq!(
            manifest_field(
                "{\n  \"name\" : \"x\",\n  \"version\": \"0.1.0\"\n}",
                "version"
            ),
            Some("0.1.0")
        );
        assert_eq!(manifest_field("{}", "version"), None);
    }
}
