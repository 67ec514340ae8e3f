<?php
// Driver for Laravel's atomic cache locks, illuminate/cache 8.83 (Debian
// php-illuminate-cache + php-illuminate-redis): Cache RedisStore::lock() with the
// phpredis driver (PhpRedisLock) and the Predis driver (RedisLock):
// get/block (SET NX EX), owner, restoreLock, release (script), forceRelease (DEL).
// Laravel 8's lock has no extend.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
declare(strict_types=1);
require_once 'Illuminate/Cache/autoload.php';
require_once 'Illuminate/Redis/autoload.php';
require_once 'Predis/autoload.php';

use Illuminate\Cache\RedisStore;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Illuminate\Redis\RedisManager;

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

// raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
$raw = new Redis();
$raw->connect($host, $port, 2.0);
$raw->client('setname', 'fencer-survey-check');

function store(string $driver, string $host, int $port): RedisStore {
    $manager = new RedisManager(null, $driver, [
        'client' => $driver,
        'default' => ['host' => $host, 'port' => $port, 'database' => 0, 'timeout' => 2.0],
    ]);
    return new RedisStore($manager, 'survey', 'default'); // keys: survey:<name>
}

function exercise(string $driver, string $host, int $port, Redis $raw): void {
    $name = 'fencer-survey-' . getmypid() . '-' . $driver;
    $key = 'survey:' . $name;
    $sa = store($driver, $host, $port);
    $sb = store($driver, $host, $port);

    $a = $sa->lock($name, 5);
    echo "$driver: lock class " . get_class($a) . "\n";
    check($a->get() === true, "$driver: acquired key=$key owner=" . $a->owner());
    check($raw->get($key) === $a->owner(), "$driver: key holds the owner string");
    check($raw->ttl($key) >= 4, "$driver: lease set with EX 5");

    $b = $sb->lock($name, 5);
    check($b->get() === false, "$driver: second acquirer refused by get() while the first holds the lock");
    $t0 = microtime(true);
    $timedOut = false;
    try { $b->block(1); } catch (LockTimeoutException $e) { $timedOut = true; }
    check($timedOut, sprintf("%s: second acquirer block(1) threw LockTimeoutException after %.2f s (Laravel counts whole seconds)", $driver, microtime(true) - $t0));
    check($b->release() === false, "$driver: release() by a non-owner does nothing (script returns 0)");
    check($raw->get($key) === $a->owner(), "$driver: holder unchanged");

    // another process takes over the lock by owner token
    $restored = $sb->restoreLock($name, $a->owner());
    check($restored->owner() === $a->owner(), "$driver: restoreLock(name, owner) on another connection carries the owner");
    check($restored->release() === true, "$driver: released via the restored lock");
    check($raw->exists($key) === 0, "$driver: key gone after release");

    $v = $sb->lock($name, 5)->get(fn() => 'critical section ran');
    check($v === 'critical section ran', "$driver: second acquirer acquires after release (get with callback, auto release)");
    check($raw->exists($key) === 0, "$driver: released after the callback");

    $c = $sa->lock($name, 5);
    check($c->get() === true, "$driver: acquired again");
    $sb->lock($name)->forceRelease();
    check($raw->exists($key) === 0, "$driver: forceRelease() deleted it (plain DEL)");
}

try {
    exercise('phpredis', $host, $port, $raw);
    exercise('predis', $host, $port, $raw);
    echo "note: Laravel 8's cache lock has no extend\n";
    echo "PASS php-laravel-cache-lock\n";
    exit(0);
} catch (Throwable $e) {
    fwrite(STDERR, "FAIL: " . get_class($e) . ": " . $e->getMessage() . "\n" . $e->getTraceAsString() . "\n");
    exit(1);
}
