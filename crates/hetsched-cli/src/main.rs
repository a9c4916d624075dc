//! The `hetsched` command. Arguments are checked before anything is built or run; errors map to
//! exit codes: 0 success, 1 runtime failure, 2 bad input or usage (one line naming what is wrong).

use clap::{Parser, Subcommand};
use hetsched_cli::{
    live, policies, reproduce, signature, simulate, sweep, topo, validate, BadInput,
};
use std::process::ExitCode;

/// Thread placement for asymmetric multicore machines: a simulator and a live Linux backend
/// running the same policies.
#[derive(Parser, Debug)]
#[command(name = "hetsched", version, about, propagate_version = true)]
struct Cli {
    /// With no command, `simulate` runs the embedded default scenario.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show a machine: this one (from sysfs), a preset, or a machine file.
    Topo(topo::TopoArgs),
    /// List the machine presets.
    Machines(topo::ListArgs),
    /// Run policies side by side on a simulated machine (no arguments: the default scenario).
    Simulate(simulate::SimulateArgs),
    /// Run a parameter sweep (a TOML grid of machines, workloads, policies, seeds, parameters) on
    /// this machine's cores into one table; run again, it resumes where it stopped.
    Sweep(sweep::SweepArgs),
    /// List the workload presets.
    Workloads(simulate::WorkloadsArgs),
    /// List the policies: what each observes, where it runs, the paper it implements.
    Policies(topo::ListArgs),
    /// Reproduce the papers' experiments on the simulator, the paper's values beside ours.
    Reproduce(reproduce::ReproduceArgs),
    /// Architectural signature (HASS) of a program from its memory trace, or of a program run
    /// under valgrind (--record -- CMD).
    Signature(signature::SignatureArgs),
    /// Run a program under a policy on this machine's real threads; its exit status passes through.
    Run(live::RunArgs),
    /// Make CPUs slow by duty cycling (AMPS-style emulation of an asymmetric machine).
    Emulate(live::EmulateArgs),
    /// Manage the processes matching configured rules until SIGTERM.
    Daemon(live::DaemonArgs),
    /// Show a running daemon's statistics.
    Stats(live::StatsArgs),
    /// Say what this machine and these privileges give the live backend, and what each missing
    /// piece disables.
    Doctor(live::DoctorArgs),
    /// Check the simulator against this machine: programs run live (as the machine is, and with a
    /// CPU made slow by emulation) beside their simulated twins (root).
    Validate(validate::ValidateArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(CompletionsArgs),
    /// Print the man page (roff) on stdout.
    Man,
}

/// `hetsched completions SHELL`.
#[derive(clap::Args, Debug)]
struct CompletionsArgs {
    /// The shell to complete for.
    shell: clap_complete::Shell,
}

/// Whether `command` only reads its inputs and prints: such a command ends quietly when the
/// reader of its output goes away (`hetsched simulate --json | head -1`), as `cat` does, by
/// SIGPIPE's default action. Rust ignores SIGPIPE, so each print would panic instead. The live
/// commands, and `signature --record`, keep it ignored: a peer gone from one of their sockets or
/// pipes must not end them before they restore what they changed or reap what they started.
fn ends_quietly_on_a_closed_pipe(command: Option<&Command>) -> bool {
    match command {
        None
        | Some(
            Command::Topo(_)
            | Command::Machines(_)
            | Command::Simulate(_)
            | Command::Sweep(_)
            | Command::Workloads(_)
            | Command::Policies(_)
            | Command::Reproduce(_)
            | Command::Validate(_)
            | Command::Completions(_)
            | Command::Man,
        ) => true,
        Some(Command::Signature(args)) => !args.records(),
        Some(
            Command::Run(_)
            | Command::Emulate(_)
            | Command::Daemon(_)
            | Command::Stats(_)
            | Command::Doctor(_),
        ) => false,
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HETSCHED_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .without_time()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    if ends_quietly_on_a_closed_pipe(cli.command.as_ref()) {
        // SAFETY: restoring a signal's default disposition, before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    // The exit status of a program `run`, `emulate` or `signature --record` launched, passed
    // through.
    let mut status = 0u8;
    let result = match cli.command {
        Some(Command::Topo(args)) => topo::run_topo(&args),
        Some(Command::Machines(args)) => topo::run_machines(&args),
        Some(Command::Simulate(args)) => simulate::run_simulate(&args),
        Some(Command::Sweep(args)) => sweep::run_sweep(&args),
        Some(Command::Workloads(args)) => simulate::run_workloads(&args),
        Some(Command::Policies(args)) => policies::run_policies(&args),
        Some(Command::Reproduce(args)) => reproduce::run_reproduce(&args),
        Some(Command::Signature(args)) => signature::run_signature(&args).map(|code| status = code),
        Some(Command::Run(args)) => live::run_run(&args).map(|code| status = code),
        Some(Command::Emulate(args)) => live::run_emulate(&args).map(|code| status = code),
        Some(Command::Daemon(args)) => live::run_daemon(&args),
        Some(Command::Stats(args)) => live::run_stats(&args),
        Some(Command::Doctor(args)) => live::run_doctor(&args),
        Some(Command::Validate(args)) => validate::run_validate(&args),
        Some(Command::Completions(args)) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(args.shell, &mut cmd, "hetsched", &mut std::io::stdout());
            Ok(())
        }
        Some(Command::Man) => {
            let cmd = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(cmd)
                .render(&mut std::io::stdout())
                .map_err(anyhow::Error::from)
        }
        None => simulate::run_simulate(&simulate::SimulateArgs {
            baseline: hetsched_sim::baseline::linux_6::NAME.into(),
            seed: 1,
            seeds: 1,
            quantum_ms: 4.0,
            ..Default::default()
        }),
    };
    match result {
        Ok(()) => ExitCode::from(status),
        Err(e) => {
            let code = if e.downcast_ref::<BadInput>().is_some() {
                2
            } else {
                1
            };
            eprintln!("hetsched: {e:#}");
            ExitCode::from(code)
        }
    }
}
