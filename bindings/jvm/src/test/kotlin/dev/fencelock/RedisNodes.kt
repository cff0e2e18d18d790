package dev.fencelock

import java.io.BufferedReader
import java.io.File
import java.io.Writer

/**
 * The shared Redis harness (tests/harness, program `redis-nodes`) as a child
 * process: its first stdout line lists the node URLs; then one command per
 * stdin line (`kill I`, `restart I`, `pause I`, `resume I`, `call I ARGS…`)
 * answered `ok …` or `error: …`. Closing stdin stops every node.
 */
class RedisNodes(count: Int) : AutoCloseable {
    private val process: Process
    private val input: Writer
    private val output: BufferedReader

    /** The node URLs, `redis://127.0.0.1:PORT`. */
    val urls: List<String>

    init {
        process = ProcessBuilder(program(), "--nodes", count.toString())
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start()
        input = process.outputStream.bufferedWriter()
        output = process.inputStream.bufferedReader()
        val first = output.readLine() ?: error("redis-nodes printed nothing (is redis-server installed?)")
        urls = Regex("\"(redis://[^\"]+)\"").findAll(first).map { it.groupValues[1] }.toList()
        check(urls.size == count) { "redis-nodes said: $first" }
    }

    /** Runs one harness command; returns what follows `ok`, throws on `error: …`. */
    @Synchronized
    fun run(command: String): String {
        input.write(command + "\n")
        input.flush()
        val line = output.readLine() ?: "error: harness exited"
        check(line.startsWith("ok")) { "harness: $command -> $line" }
        return if (line.length > 2) line.substring(3) else ""
    }

    /** Runs a Redis command on node [index]. */
    fun call(index: Int, command: String): String = run("call $index $command")

    override fun close() {
        input.close()
        process.waitFor()
    }

    companion object {
        /** `$FENCELOCK_REDIS_NODES`, else the workspace's debug build. */
        fun program(): String {
            System.getenv("FENCELOCK_REDIS_NODES")?.takeIf { it.isNotEmpty() }?.let { return it }
            val repo = System.getProperty("fencelock.repo") ?: "../.."
            val built = File(repo, "target/debug/redis-nodes")
            check(built.canExecute()) { "no redis-nodes at $built: run scripts/test-jvm.sh" }
            return built.path
        }

        /** The repository's root (for tests/vectors). */
        fun repo(): File = File(System.getProperty("fencelock.repo") ?: "../..")
    }
}
