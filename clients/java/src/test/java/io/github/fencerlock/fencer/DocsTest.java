package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;

/**
 * The examples of docs/clients-java.md run as pasted: every java block that
 * is a whole program is extracted, compiled against the client, and run in
 * a JVM of its own against a real fencerd (FENCER_ADDR) and PostgreSQL
 * (JDBC_URL). Each must exit 0.
 */
class DocsTest {
  static Path docs() {
    String repo = System.getProperty("fencer.repo");
    Path p = repo != null && !repo.isEmpty() && !repo.startsWith("$")
        ? Path.of(repo, "docs", "clients-java.md") : Path.of("../../docs/clients-java.md");
    return p;
  }

  @Test
  void theExamplesRunAsPasted() throws Exception {
    String md = Files.readString(docs());
    Matcher m = Pattern.compile("```java\\n(.*?)```", Pattern.DOTALL).matcher(md);
    Path dir = Files.createTempDirectory("fencer-docs");
    List<String> classes = new ArrayList<>();
    List<String> sources = new ArrayList<>();
    while (m.find()) {
      String src = m.group(1);
      if (!src.contains("public static void main")) {
        continue;
      }
      Matcher cls = Pattern.compile("public class (\\w+)").matcher(src);
      assertTrue(cls.find(), "an example without a public class:\n" + src);
      Path f = dir.resolve(cls.group(1) + ".java");
      assertFalse(Files.exists(f), "two examples named " + cls.group(1));
      Files.writeString(f, src);
      classes.add(cls.group(1));
      sources.add(f.toString());
    }
    assertTrue(classes.size() >= 6, "examples found: " + classes);
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    List<String> args = new ArrayList<>(List.of("-d", dir.toString(), "-classpath", KleppmannTest.classPath()));
    args.addAll(sources);
    assertEquals(0, javac.run(null, null, null, args.toArray(new String[0])), "the examples compile");

    String addr = Servers.oneAddr();
    String jdbc = Servers.postgres().newDatabase();
    for (String c : classes) {
      ProcessBuilder pb = new ProcessBuilder(System.getProperty("java.home") + "/bin/java", "-cp",
          dir + File.pathSeparator + KleppmannTest.classPath(), c).redirectErrorStream(true);
      pb.environment().put("FENCER_ADDR", addr);
      pb.environment().put("JDBC_URL", jdbc);
      Process p = pb.start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertTrue(p.waitFor(60, TimeUnit.SECONDS), c + " did not end");
      System.out.println("== " + c + "\n" + out.replaceAll("(?m)^SLF4J.*\\n", ""));
      assertEquals(0, p.exitValue(), c + " failed:\n" + out);
    }
  }
}
