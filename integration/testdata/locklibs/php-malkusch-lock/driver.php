<?php
// Driver for malkusch/lock 2.2.1 (Debian php-malkusch-lock): PHPRedisMutex
// (phpredis extension) and PredisMutex (Predis) — SET NX EX + release script,
// Redlock majority over the given servers. The library has no extend.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
declare(strict_types=1);
require_once 'Malkusch/Lock/autoload.php';
require_once 'Predis/autoload.php';

use malkusch\lock\mutex\PHPRedisMutex;
use malkusch\lock\mutex\PredisMutex;
use malkusch\lock\exception\TimeoutException;

[$host, $port] = explode(':', getenv('REDIS_ADDR') ?: '127.0.0.1:6379') + [1 => '6379'];
$port = (int)$port;
set_exception_handler(function (Throwable $e): void {
    fwrite(STDERR, "FAIL: " . get_class($e) . ": " . $e->getMessage() . "\n");
    exit(1);
});

function check(bool $cond, string $msg): void {
    if (!$cond) { throw new RuntimeException($msg); }
    echo "ok: $msg\n";
}
function phpredis(string $host, int $port): Redis {
    $r = new Redis();
    $r->connect($host, $port, 2.0);
    return $r;
}
function predis(string $host, int $port): Predis\Client {
    return new Predis\Client(['scheme' => 'tcp', 'host' => $host, 'port' => $port]);
}

// raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
$raw = phpredis($host, $port);
$raw->client('setname', 'fencer-survey-check');

function exercise(string $label, callable $makeMutex, Redis $raw): void {
    $name = 'fencer-survey-' . getmypid() . '-' . $label;
    $key = 'lock_' . $name;
    $first = $makeMutex($name, 3);
    $result = $first->synchronized(function () use ($label, $key, $name, $makeMutex, $raw): string {
        $token = $raw->get($key);
        $ttl = $raw->ttl($key);
        echo "$label: acquired key=$key token=$token ttl={$ttl}s\n";
        check(is_string($token) && strlen($token) === 32, "$label: key holds a 32-hex-digit token");
        // a second mutex on the same name, 1 s timeout: must be refused
        $second = $makeMutex($name, 1);
        $t0 = microtime(true);
        $refused = false;
        try {
            $second->synchronized(function () { return 'entered'; });
        } catch (TimeoutException $e) {
            $refused = true;
            printf("%s: second acquirer: %s (after %.2f s)\n", $label, $e->getMessage(), microtime(true) - $t0);
        }
        check($refused, "$label: second acquirer refused while the first holds the lock");
        check($raw->get($key) === $token, "$label: holder token unchanged by the refused attempts");
        return 'done';
    });
    check($result === 'done', "$label: synchronized() returned the critical section's value");
    echo "$label: released\n";
    check($raw->exists($key) === 0, "$label: key gone after release");
    $again = $makeMutex($name, 1)->synchronized(function () { return 'second got it'; });
    check($again === 'second got it', "$label: second acquirer acquires after release");
}

try {
    exercise('phpredis', fn(string $n, int $t) => new PHPRedisMutex([phpredis($host, $port)], $n, $t), $raw);
    exercise('predis', fn(string $n, int $t) => new PredisMutex([predis($host, $port)], $n, $t), $raw);
    echo "note: malkusch/lock has no extend; the lease is timeout+1 seconds (SET ... EX)\n";
    echo "PASS php-malkusch-lock\n";
    exit(0);
} catch (Throwable $e) {
    fwrite(STDERR, "FAIL: " . get_class($e) . ": " . $e->getMessage() . "\n" . $e->getTraceAsString() . "\n");
    exit(1);
}
