//! Project tasks: `cargo xtask ci`.

fn main() {
    eprintln!("xtask: not built yet");
    std::process::exit(1);
}
